// Shape functions of the data-movement ops: Reshape, Slice, Gather, Concat, Split, Pad, Tile, etc.
#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {

std::string inferFlatten(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferReshape(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferTranspose(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferSqueeze(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferUnsqueeze(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferConcat(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferSplit(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferSlice(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferGather(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferShape(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferConstant(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferConstantOfShape(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferExpand(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferPad(const Ctx& c) { return c.fail("shape function not written yet"); }
std::string inferTile(const Ctx& c) { return c.fail("shape function not written yet"); }

}  // namespace tandem::shapes
