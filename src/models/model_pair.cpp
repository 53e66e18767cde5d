#include "models/model_pair.h"

#include "models/model_files.h"
#include "util/error.h"

namespace dflash {

ModelPair load_pair(const PairOptions& o) {
  ModelPair p;
  p.backend = o.backend ? o.backend : make_cpu_backend(o.threads);
  p.tokenizer = load_tokenizer_if_present(o.model);
  if (!p.tokenizer && o.need_tokenizer)
    throw file_error(o.model, "missing tokenizer.json (the server needs the model's tokenizer)");
  LoadOptions lo;
  lo.weights = o.weights;
  lo.populate = o.populate;
  lo.backend = p.backend;
  p.target = TargetModel::load(o.model, lo);
  p.target->set_cache_type(o.cache_type);
  if (!o.draft.empty()) {
    p.draft = DFlashDraft::load(o.draft, lo, *p.target);
    p.draft->set_cache_type(o.draft_cache_type);
  }
  p.stop_ids = stop_ids_for(p.target->config(), p.tokenizer.get());
  return p;
}

}  // namespace dflash
