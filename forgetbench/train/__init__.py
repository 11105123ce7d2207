"""Training: corpus and vocabulary preparation, the shared loop (schedule, checkpoint, resume), export.

``train.mt`` trains the teacher (``forgetbench train-mt``); distillation builds on the same loop.
"""
