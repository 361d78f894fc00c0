"""The interest model: input encoder, bias-aware graph attention, interest primitives, cross-view
distillation and the training losses."""
