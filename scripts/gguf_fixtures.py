"""GGUF test fixtures written and read with the reference implementation (gguf-py).

  all-types OUT.gguf   a small file with one key of every value type, typed
                       arrays, a custom alignment and tensors of five ggml types;
                       tests/gguf_reference.rs hard-codes the values written here.
  tiny-llama OUT.gguf  a tiny but complete llama (random weights from a seeded
                       numpy generator, small gpt2-style vocab, 330 KB: made
                       in the cache by scripts/make-fixtures.sh, not committed)
  manifest FILE.gguf   one line per key and per tensor as gguf-py reads them:
                         kv <key> <type id> <array elem type id or -> <array len or ->
                         tensor <name> <type id> <ne0,ne1,...> <absolute offset> <n bytes>
                       and, for F32/F16 tensors, the first values of row 0:
                         row0 <name> <f32 bits of up to 8 values, hex, comma-separated>
                       tests compare detllm's reader with it line by line.

Run through scripts/make-fixtures.sh (it sets up the venv).
"""
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as T, GGMLQuantizationType as Q


def all_types(out):
    w = gguf.GGUFWriter(out, "llama")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 1e-5)
    w.add_bool("t.bool", True)
    w.add_bool("t.false", False)
    w.add_string("t.str", "héllo wörld")
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 0.1)
    w.add_key_value("t.arr_str", ["a", "", "Ġthe", "<|im_end|>"], T.ARRAY, sub_type=T.STRING)
    w.add_key_value("t.arr_i32", [1, -2, 3, 2147483647, -2147483648], T.ARRAY, sub_type=T.INT32)
    w.add_key_value("t.arr_f32", [0.5, -2.0, 1e-5], T.ARRAY, sub_type=T.FLOAT32)
    w.add_key_value("t.arr_u8", [1, 2, 255], T.ARRAY, sub_type=T.UINT8)
    w.add_key_value("t.arr_u64", [2**40], T.ARRAY, sub_type=T.UINT64)
    w.add_key_value("t.arr_bool", [True, False], T.ARRAY, sub_type=T.BOOL)
    rng = np.random.default_rng(7)
    # F32 [3, 2] (ne = [3, 2]): numpy shape is (rows, cols) = (2, 3).
    w.add_tensor("f32", np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5)
    w.add_tensor("f16", np.array([1.0, -0.5, 65504.0, 2.0**-24], dtype=np.float16))
    # Quantized tensors as raw bytes: 2 rows x 1 block (Q8_0: 34 bytes per block).
    w.add_tensor("q8_0", rng.integers(0, 256, (2, 34), dtype=np.uint8), raw_dtype=Q.Q8_0)
    w.add_tensor("q4_1", rng.integers(0, 256, (1, 40), dtype=np.uint8), raw_dtype=Q.Q4_1)
    w.add_tensor("bf16", rng.integers(0, 256, (3, 4), dtype=np.uint8), raw_dtype=Q.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_llama(out):
    """A tiny llama GGUF: 2 layers, dim 64, GQA 4/2, F32 and F16 weights."""
    rng = np.random.default_rng(3)
    n_vocab, dim, ffn, n_layer, n_head, n_kv = 300, 64, 128, 2, 4, 2
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("tiny-test")
    w.add_context_length(256)
    w.add_embedding_length(dim)
    w.add_feed_forward_length(ffn)
    w.add_block_count(n_layer)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(dim // n_head)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    # The byte-level alphabet (GPT-2's byte -> unicode map) and a few merges.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    toks = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [chr(c) for c in cs]
    merges = ["Ġ t", "Ġ a", "h e", "i n", "Ġt he", "e r", "o n", "Ġ s", "r e", "a t"]
    for m in merges:
        if m.replace(" ", "") not in toks:
            toks.append(m.replace(" ", ""))
    while len(toks) < n_vocab:
        toks.append(f"<extra_{len(toks)}>")
    w.add_token_list(toks)
    w.add_token_types([3] * 3 + [1] * (n_vocab - 3))
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def rand(name, shape, dtype=np.float32):
        w.add_tensor(name, (rng.standard_normal(shape) * 0.05).astype(dtype))

    rand("token_embd.weight", (n_vocab, dim))
    for l in range(n_layer):
        w.add_tensor(f"blk.{l}.attn_norm.weight", np.ones(dim, np.float32))
        w.add_tensor(f"blk.{l}.ffn_norm.weight", np.ones(dim, np.float32))
        rand(f"blk.{l}.attn_q.weight", (dim, dim), np.float16)
        rand(f"blk.{l}.attn_k.weight", (dim // n_head * n_kv, dim), np.float16)
        rand(f"blk.{l}.attn_v.weight", (dim // n_head * n_kv, dim), np.float16)
        rand(f"blk.{l}.attn_output.weight", (dim, dim), np.float16)
        rand(f"blk.{l}.ffn_gate.weight", (ffn, dim))
        rand(f"blk.{l}.ffn_up.weight", (ffn, dim))
        rand(f"blk.{l}.ffn_down.weight", (dim, ffn))
    w.add_tensor("output_norm.weight", np.ones(dim, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def manifest(path):
    r = gguf.GGUFReader(path)
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        main = int(f.types[0])
        if f.types[0] == T.ARRAY:
            print(f"kv {name} {main} {int(f.types[-1])} {len(f.data)}")
        else:
            print(f"kv {name} {main} - -")
    for t in r.tensors:
        ne = ",".join(str(int(d)) for d in t.shape)
        print(f"tensor {t.name} {int(t.tensor_type)} {ne} {t.data_offset} {t.n_bytes}")
        if t.tensor_type in (Q.F32, Q.F16):
            row0 = np.asarray(t.data).reshape(-1)[: min(8, int(t.shape[0]))].astype(np.float32)
            print(f"row0 {t.name} " + ",".join(f"{int(b):08x}" for b in row0.view(np.uint32)))


if __name__ == "__main__":
    {"all-types": all_types, "tiny-llama": tiny_llama, "manifest": manifest}[sys.argv[1]](sys.argv[2])
