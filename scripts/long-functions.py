#!/usr/bin/env python3
# Lists functions longer than MINLEN lines (default 150) in the given source trees (issue 13:
# none in compiler/, passes/, runtime/). A crude brace matcher over comment- and string-stripped
# C++: a {...} block at function level whose opening brace follows a parameter list.
#   scripts/long-functions.py compiler passes runtime tools frontend
import os
import re
import sys
# crude brace matcher: find function bodies at namespace/class level: a '{' preceded by ')' (+ qualifiers) 
def strip(s):
    s=re.sub(r'R"([^(]*)\((.*?)\)\1"',lambda m:"\n"*m.group(0).count("\n"),s,flags=re.S)
    s=re.sub(r'//[^\n]*','',s)
    s=re.sub(r'/\*.*?\*/',lambda m:'\n'*m.group(0).count('\n'),s,flags=re.S)
    s=re.sub(r'"(\\.|[^"\\\n])*"','""',s)
    s=re.sub(r"'(\\.|[^'\\\n])'","''",s)
    return s
out=[]
for root in sys.argv[1:]:
  for dp,dn,fn in os.walk(root):
    for f in fn:
      if not f.endswith(('.cpp','.h','.cu')): continue
      p=os.path.join(dp,f); s=strip(open(p,errors='ignore').read())
      i=0; depth=0; stack=[]
      for m in re.finditer(r'[{}]',s):
        if m.group(0)=='{':
          pre=s[max(0,m.start()-300):m.start()]
          isfn=re.search(r'\)\s*(const\s*)?(override\s*)?(noexcept\s*)?(->\s*[\w:<>]+\s*)?(:[^;{}]*)?$',pre) is not None
          hdr=pre.strip().split('\n')[-1] if isfn else None
          stack.append((m.start(),isfn,hdr))
        else:
          if not stack: continue
          st,isfn,hdr=stack.pop()
          if isfn and not any(x[1] for x in stack):
            n=s.count('\n',st,m.start())+1
            if n>int(os.environ.get("MINLEN","150")):
              line=s.count('\n',0,st)+1
              out.append((n,p,line,hdr))
for n,p,l,h in sorted(out,reverse=True): print(n,p+':'+str(l),(h or '')[:80])
