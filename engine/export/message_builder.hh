// Packs records into messages of at most max_message octets. IPFIX messages
// and NetFlow v9 export packets have the same shape: a header, then sets
// (FlowSets) of a 4-octet set header (id, length) and records of one
// template; NetFlow v9 pads each set to 4 octets. A message is closed when
// the next record, with a set header if it starts a set, would not fit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::flow_export {

using Messages = std::vector<std::vector<uint8_t>>;

inline constexpr size_t kSetHeaderLen = 4;

class MessageBuilder {
 public:
  struct Layout {
    size_t header_len;
    size_t max_message;
    bool pad_sets;  // NetFlow v9: sets padded to 4 octets
  };
  // The protocol's header.
  class Header {
   public:
    // The fields known when a message starts.
    virtual void begin(uint8_t *header) = 0;
    // The rest, once the message is full: its length, data records, and
    // records of any kind (templates too).
    virtual void end(uint8_t *header, size_t length, uint32_t data_records, uint32_t records) = 0;

   protected:
    ~Header() = default;
  };

  // Messages are appended to `out`; with `flow_records`, for each message
  // the number of flow records that it completes (flow_record_done()).
  MessageBuilder(const Layout &layout, Header &header, Messages &out, std::vector<uint32_t> *flow_records)
      : layout_(layout), header_(header), out_(out), flow_records_(flow_records) {}
  ~MessageBuilder() { finish(); }
  MessageBuilder(const MessageBuilder &) = delete;
  MessageBuilder &operator=(const MessageBuilder &) = delete;

  // Room for one record of `len` octets in a set `set_id`; where it goes.
  uint8_t *add(uint16_t set_id, size_t len, bool data);
  // Every record of one flow record has been added: it counts in the current message.
  void flow_record_done() {
    if (flow_records_) ++flow_records_->back();
  }
  void finish();
  // Ends the open set: the next record starts a set of its own.
  void close_set();

 private:
  void start_message();
  size_t padding(size_t set_length) const { return layout_.pad_sets ? (4 - set_length % 4) % 4 : 0; }

  Layout layout_;
  Header &header_;
  Messages &out_;
  std::vector<uint32_t> *flow_records_;
  std::vector<uint8_t> *msg_ = nullptr;
  size_t set_start_ = 0;
  uint16_t set_id_ = 0;
  bool set_open_ = false;
  uint32_t data_records_ = 0, records_ = 0;
};

}  // namespace sluice::flow_export
