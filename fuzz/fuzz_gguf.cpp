// Fuzzes the GGUF reader (src/formats/gguf.h): header, typed metadata (nested arrays, strings,
// counts), tensor infos and the aligned data section. Every count, length and offset comes from
// the file, so each is a chance to allocate too much or read past the end; a bad file must be a
// dflash::Error. The input is the whole file.
#include <cstdint>

#include "formats/gguf.h"
#include "fuzz_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::ScratchFile scratch;
  const std::string& path = scratch.write(data, size);
  try {
    dflash::GgufFile f(path);
    unsigned sum = 0;
    for (const auto& t : f.tensors()) {
      if (t.nbytes) sum += t.data[0] + t.data[t.nbytes - 1];
      sum += unsigned(t.numel());
      if (f.tensor(t.name) == nullptr) __builtin_trap();  // every listed tensor is found by name
    }
    // The typed getters the model and tokenizer loaders call: wrong types are Errors.
    for (const auto& [key, v] : f.metadata()) {
      try {
        if (v.type == dflash::GgufValueType::STRING) sum += unsigned(f.get_string(key)->size());
        else if (v.type == dflash::GgufValueType::BOOL) sum += *f.get_bool(key);
        else if (v.is_int()) sum += unsigned(*f.get_int(key));
        else if (v.type == dflash::GgufValueType::F32 || v.type == dflash::GgufValueType::F64)
          sum += *f.get_float(key) > 0;
      } catch (const dflash::Error&) {
      }
    }
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const dflash::Error&) {
    // A refused file: the expected outcome for most inputs.
  }
  return 0;
}
