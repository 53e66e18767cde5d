// The Qwen3.5 hybrid family (models/qwen35): a position's logits are bitwise the same in
// decode, in a 5-row verify and in a 512-row prefill (f32, f16, bf16, q8, q4; 1 and 2 threads);
// rolling back into a verify block replays the kept rows to exactly the state plain decoding
// reaches; sequences batched together get their own bits; and the state's rollback points.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "models/qwen35/qwen35_model.h"
#include "util/error.h"

using namespace dflash;

namespace {

ModelConfig hybrid_config() {
  ModelConfig c;
  c.architecture = "Qwen3_5ForCausalLM";
  c.hidden = 128, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 32, c.ffn = 256, c.vocab = 320;
  c.rope_theta = 1e7;
  c.rope_dims = 8;
  c.linear = {2, 4, 32, 32, 4};
  c.layer_kinds = {LayerKind::LinearAttention, LayerKind::Attention, LayerKind::LinearAttention,
                   LayerKind::LinearAttention};
  return c;
}

std::vector<int32_t> ids_of(int n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 37 + 5) % 320);
  return ids;
}

// Logits of all positions, computed in forwards of `piece` rows.
std::vector<float> run(const TargetModel& m, const std::vector<int32_t>& ids, int piece) {
  const int n = int(ids.size()), V = m.config().vocab;
  auto st = m.new_state(n);
  std::vector<float> out(size_t(n) * V);
  for (int pos = 0; pos < n; pos += piece) {
    ForwardArgs a;
    a.tokens = ids.data() + pos;
    a.n = std::min(piece, n - pos);
    a.logits_from = 0;
    a.logits = out.data() + size_t(pos) * V;
    m.forward(*st, a);
  }
  return out;
}

// Like run(), but every forward is a verify of `piece` rows of which only the first
// 1 + k % piece are kept (the rest hold wrong tokens and are rolled back), as speculative
// decoding does; the kept rows' logits are written out.
std::vector<float> run_verify(const TargetModel& m, const std::vector<int32_t>& ids, int piece) {
  const int n = int(ids.size()), V = m.config().vocab;
  auto st = m.new_state(n + piece);
  std::vector<float> out(size_t(n) * V), block(size_t(piece) * V);
  std::vector<int32_t> rows(static_cast<size_t>(piece));
  int pos = 0;
  for (int k = 0; pos < n; ++k) {
    const int keep = std::min(1 + k % piece, n - pos);
    for (int i = 0; i < piece; ++i) rows[size_t(i)] = i < keep ? ids[size_t(pos + i)] : int32_t((ids[0] + 1 + i) % V);
    ForwardArgs a;
    a.tokens = rows.data();
    a.n = piece;
    a.logits_from = 0;
    a.logits = block.data();
    a.rollback_rows = true;
    m.forward(*st, a);
    EXPECT_EQ(pos + keep, st->rollback_point(pos + keep));
    st->rollback(pos + keep);
    std::memcpy(out.data() + size_t(pos) * V, block.data(), sizeof(float) * size_t(keep) * V);
    pos += keep;
  }
  return out;
}

}  // namespace

TEST(Hybrid, DecodeVerifyAndPrefillGiveIdenticalBits) {
  const auto ids = ids_of(520);
  for (WType t : {WType::F32, WType::F16, WType::BF16, WType::Q8_0, WType::Q4_0}) {
    auto m2 = Qwen35Model::random(hybrid_config(), t, 42, make_cpu_backend(2));
    auto m1 = Qwen35Model::random(hybrid_config(), t, 42, make_cpu_backend(1));
    const auto prefill = run(*m2, ids, 512);
    ASSERT_TRUE(m2->backend().all_finite(prefill.data(), prefill.size()));
    const auto decode = run(*m1, ids, 1);
    const auto five = run(*m2, ids, 5);
    const auto odd = run(*m1, ids, 7);
    const auto verify = run_verify(*m2, ids, 5);
    for (const auto* other : {&decode, &five, &odd, &verify})
      ASSERT_EQ(0, std::memcmp(prefill.data(), other->data(), sizeof(float) * prefill.size())) << wtype_name(t);
  }
}

TEST(Hybrid, RollbackIntoAVerifyBlockReplaysToPlainDecodingsState) {
  auto m = Qwen35Model::random(hybrid_config(), WType::BF16, 7, make_cpu_backend(2));
  const int V = m->config().vocab;
  const auto ids = ids_of(40);
  const auto plain = run(*m, ids, 1);
  for (int keep = 0; keep <= 8; ++keep) {
    auto st = m->new_state(64);
    ForwardArgs pre;
    pre.tokens = ids.data();
    pre.n = 20;
    m->forward(*st, pre);
    std::vector<int32_t> block(ids.begin() + 20, ids.begin() + 28);
    for (int i = keep; i < 8; ++i) block[size_t(i)] = (block[size_t(i)] + 3) % V;  // rejected rows
    ForwardArgs v;
    v.tokens = block.data();
    v.n = 8;
    v.rollback_rows = true;
    m->forward(*st, v);
    ASSERT_EQ(20 + keep, st->rollback_point(20 + keep));
    st->rollback(20 + keep);
    ASSERT_EQ(20 + keep, st->length());
    // Continue plainly from there: every later position must be plain decoding's.
    std::vector<float> lg(size_t(40 - 20 - keep) * V);
    ForwardArgs rest;
    rest.tokens = ids.data() + 20 + keep;
    rest.n = 40 - 20 - keep;
    rest.logits_from = 0;
    rest.logits = lg.data();
    m->forward(*st, rest);
    ASSERT_EQ(0, std::memcmp(plain.data() + size_t(20 + keep) * V, lg.data(), sizeof(float) * lg.size()))
        << "kept " << keep << " of 8";
  }
}

TEST(Hybrid, RollbackPointsOfTheRecurrentState) {
  auto m = Qwen35Model::random(hybrid_config(), WType::BF16, 9, make_cpu_backend(1));
  const auto ids = ids_of(30);
  auto st = m->new_state(64);
  ForwardArgs a;
  a.tokens = ids.data();
  a.n = 10;
  m->forward(*st, a);  // a plain forward: only its start (0) and its end are reachable
  EXPECT_EQ(10, st->rollback_point(10));
  EXPECT_EQ(10, st->rollback_point(25));
  EXPECT_EQ(0, st->rollback_point(5));
  a.tokens = ids.data() + 10;
  a.n = 6;
  a.rollback_rows = true;
  m->forward(*st, a);  // a verify block: any row inside it
  for (int n = 10; n <= 16; ++n) EXPECT_EQ(n, st->rollback_point(n));
  EXPECT_EQ(0, st->rollback_point(9));
  EXPECT_THROW(st->rollback(9), Error);
  st->rollback(13);
  st->rollback(11);  // still inside the block after a first rollback
  EXPECT_EQ(11, st->length());
  st->rollback(0);  // start over: the state at length 0
  EXPECT_EQ(0, st->length());
  std::vector<float> lg(size_t(m->config().vocab)), fresh(lg.size());
  a.tokens = ids.data();
  a.n = 3;
  a.rollback_rows = false;
  a.logits = lg.data();
  m->forward(*st, a);
  auto st2 = m->new_state(64);
  a.logits = fresh.data();
  m->forward(*st2, a);
  EXPECT_EQ(0, std::memcmp(lg.data(), fresh.data(), sizeof(float) * lg.size()));
  EXPECT_GT(st->bytes(), st2->bytes());  // the first one still holds its verify log
}

TEST(Hybrid, SequencesBatchedTogetherGiveTheirOwnBits) {
  auto m = Qwen35Model::random(hybrid_config(), WType::Q8_0, 11, make_cpu_backend(2));
  const int V = m->config().vocab;
  const auto ids = ids_of(60);
  const int pre[3] = {5, 17, 0}, rows[3] = {6, 1, 4};
  std::vector<std::unique_ptr<SequenceState>> batched, alone;
  for (int s = 0; s < 3; ++s) {
    batched.push_back(m->new_state(64));
    alone.push_back(m->new_state(64));
    ForwardArgs a;
    a.tokens = ids.data() + s * 10;
    a.n = pre[s];
    m->forward(*batched.back(), a);
    m->forward(*alone.back(), a);
  }
  std::vector<std::vector<float>> lb(3), la(3);
  std::vector<SequenceRows> batch;
  for (int s = 0; s < 3; ++s) {
    lb[s].resize(size_t(rows[s]) * V);
    la[s].resize(lb[s].size());
    ForwardArgs a;
    a.tokens = ids.data() + 30 + s * 7;
    a.n = rows[s];
    a.logits_from = 0;
    a.logits = lb[s].data();
    a.rollback_rows = s == 0;
    batch.push_back({batched[size_t(s)].get(), a});
    a.logits = la[s].data();
    m->forward(*alone[size_t(s)], a);
  }
  m->forward_batch(batch);
  for (int s = 0; s < 3; ++s)
    ASSERT_EQ(0, std::memcmp(lb[s].data(), la[s].data(), sizeof(float) * la[s].size())) << "sequence " << s;
  batched[0]->rollback(pre[0] + 2);  // the batched verify block rolls back like a lone one
  alone[0]->rollback(pre[0] + 2);
  std::vector<float> x(static_cast<size_t>(V)), y(static_cast<size_t>(V));
  ForwardArgs a;
  a.tokens = ids.data() + 50;
  a.n = 1;
  a.logits = x.data();
  m->forward(*batched[0], a);
  a.logits = y.data();
  m->forward(*alone[0], a);
  EXPECT_EQ(0, std::memcmp(x.data(), y.data(), sizeof(float) * x.size()));
}

// A rollback into a verify block leaves the kept rows pending for the next forward; a
// checkpoint taken then (the end of a prompt) must still be the state at its length: going
// back to it and decoding on gives plain decoding's bits, and so does the base it left alone.
TEST(Hybrid, CheckpointWithRowsPendingIsTheStateAtItsLength) {
  auto m = Qwen35Model::random(hybrid_config(), WType::F32, 13, make_cpu_backend(2));
  const int V = m->config().vocab;
  const auto ids = ids_of(36);
  const auto plain = run(*m, ids, 1);
  auto st = m->new_state(64);
  ForwardArgs a;
  a.tokens = ids.data();
  a.n = 12;
  m->forward(*st, a);
  a.tokens = ids.data() + 12;
  a.n = 6;
  a.rollback_rows = true;
  m->forward(*st, a);
  st->rollback(15);  // three rows pending
  st->keep_checkpoint();
  std::vector<float> lg(size_t(36 - 15) * V);
  for (int pass = 0; pass < 2; ++pass) {
    ForwardArgs rest;
    rest.tokens = ids.data() + 15;
    rest.n = 36 - 15;
    rest.logits_from = 0;
    rest.logits = lg.data();
    m->forward(*st, rest);
    ASSERT_EQ(0, std::memcmp(plain.data() + size_t(15) * V, lg.data(), sizeof(float) * lg.size())) << "pass " << pass;
    ASSERT_EQ(15, st->rollback_point(15));
    st->rollback(15);  // the second pass starts from the checkpoint
  }
}
