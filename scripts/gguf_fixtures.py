"""GGUF test fixtures written and read with the reference implementation (gguf-py).

  all-types OUT.gguf   a small file with one key of every value type, typed
                       arrays, a custom alignment and tensors of five ggml types;
                       tests/gguf_reference.rs hard-codes the values written here.
  manifest FILE.gguf   one line per key and per tensor as gguf-py reads them:
                         kv <key> <type id> <array elem type id or -> <array len or ->
                         tensor <name> <type id> <ne0,ne1,...> <absolute offset> <n bytes>
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


if __name__ == "__main__":
    {"all-types": all_types, "manifest": manifest}[sys.argv[1]](sys.argv[2])
