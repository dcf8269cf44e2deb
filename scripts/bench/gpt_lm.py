"""The language-model form of ../shared/zoo/make_zoo.py's GptLike (the GPT of
../shared/models/gpt_like): the same modules and initialisation, returning every position's
logits [N, 64, 1000] instead of the last one's. Used by scripts/check-gpt-train-torch.py --lm
and scripts/bench/torch_gpt_train.py --lm; needs make_zoo on sys.path."""
import torch

import make_zoo


class GptLm(make_zoo.GptLike):
    def forward(self, ids):
        x = self.tok(ids) + self.pos(self.pos_ids)
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln(x))


def export_lm(path):
    """A GptLm seeded as make_zoo seeds its models, exported as make_zoo exports them (opset 13,
    input [N, 64] int64 named "input", output "logits" [N, 64, 1000]). Returns the model."""
    torch.manual_seed(make_zoo.SEED)
    model = GptLm()
    ids = torch.zeros((1, 64), dtype=torch.int64)
    torch.onnx.export(model, (ids,), path, opset_version=13, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                      do_constant_folding=True)
    return model
