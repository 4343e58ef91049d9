"""Layer 5: trainers and the model helpers they start from."""

from veriloop.training._sft import SFTStep, sft_loss, tokenize_conversation, train_sft
from veriloop.training._tiny_model import TinyModelSpec, init_tiny_model

__all__ = ["SFTStep", "TinyModelSpec", "init_tiny_model", "sft_loss", "tokenize_conversation", "train_sft"]
