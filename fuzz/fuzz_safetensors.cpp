// Fuzzes the safetensors reader (src/formats/safetensors.h): the 8-byte header length, the JSON
// header (dtype, shape, data_offsets of every tensor) and its checks against the file size.
// Model files come from anywhere; a bad one must be refused with a dflash::Error, never read
// outside the file. The input is the whole file.
#include <cstdint>
#include <cstdlib>

#include "formats/safetensors.h"
#include "fuzz_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::ScratchFile scratch;
  const std::string& path = scratch.write(data, size);
  try {
    dflash::SafetensorsFile f(path);
    // Touch the first and last byte of every tensor the reader accepted and check the view's
    // size against its shape and dtype, as the loaders rely on both.
    unsigned sum = 0;
    for (const auto& [name, t] : f.tensors()) {
      if (t.nbytes) sum += t.data[0] + t.data[t.nbytes - 1];
      const size_t esize = dflash::dtype_size(t.dtype);
      if (esize && uint64_t(t.numel()) * esize != t.nbytes) std::abort();
    }
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const dflash::Error&) {
    // A refused file: the expected outcome for most inputs.
  }
  return 0;
}
