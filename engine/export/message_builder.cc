#include "engine/export/message_builder.hh"

#include "engine/export/flow_fields.hh"

namespace sluice::flow_export {

uint8_t *MessageBuilder::add(uint16_t set_id, size_t len, bool data) {
  if (!msg_) start_message();
  // Whether a set starting at set_start, ending at end, fits with its padding.
  auto fits = [&](size_t set_start, size_t end) { return end + padding(end - set_start) <= layout_.max_message; };
  if (!(set_open_ && set_id_ == set_id && fits(set_start_, msg_->size() + len))) {
    close_set();
    if (!fits(msg_->size(), msg_->size() + kSetHeaderLen + len)) {
      finish();
      start_message();
    }
    set_start_ = msg_->size();
    set_id_ = set_id;
    set_open_ = true;
    msg_->resize(msg_->size() + kSetHeaderLen);
    put_be(msg_->data() + set_start_, set_id, 2);
  }
  size_t at = msg_->size();
  msg_->resize(at + len);
  ++records_;
  if (data) ++data_records_;
  return msg_->data() + at;
}

void MessageBuilder::finish() {
  if (!msg_) return;
  close_set();
  header_.end(msg_->data(), msg_->size(), data_records_, records_);
  msg_ = nullptr;
}

void MessageBuilder::start_message() {
  out_.emplace_back();
  if (flow_records_) flow_records_->push_back(0);
  msg_ = &out_.back();
  msg_->reserve(layout_.max_message);
  msg_->resize(layout_.header_len);
  header_.begin(msg_->data());
  data_records_ = records_ = 0;
}

void MessageBuilder::close_set() {
  if (!set_open_) return;
  msg_->resize(msg_->size() + padding(msg_->size() - set_start_), 0);
  put_be(msg_->data() + set_start_ + 2, msg_->size() - set_start_, 2);
  set_open_ = false;
}

}  // namespace sluice::flow_export
