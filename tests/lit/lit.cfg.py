# lit configuration for Tandem's pass tests: every *.mlir here runs its RUN lines with
# tandem-opt, FileCheck and not on PATH.
import os

import lit.formats

config.name = "Tandem"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tandem_obj_root, "tests", "lit")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]

path = os.pathsep.join([config.tandem_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PATH"] = path
