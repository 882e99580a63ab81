"""sotto model conversion: read Whisper checkpoints in the formats users have
(CTranslate2 / faster-whisper, Hugging Face safetensors, whisper.cpp ggml) and
write the one GGUF layout described in docs/model-format.md."""
