//! Tokenizers built from a GGUF vocabulary.
