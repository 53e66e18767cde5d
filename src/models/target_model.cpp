// The default backend of a load.
#include "models/target_model.h"

namespace dflash {

const std::shared_ptr<Backend>& backend_of(LoadOptions& opt) {
  if (!opt.backend) opt.backend = make_cpu_backend();
  return opt.backend;
}

}  // namespace dflash
