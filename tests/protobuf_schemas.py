"""`.proto` schemas the protobuf tests of every tier share: an order with every kind of field floe maps
(scalars, enum, nested, repeated, maps, oneof, well-known types, proto3 optional) importing a second
file, compiled with protoc through `catalog.pipelines.protobuf.descriptor_set`."""

COMMON = """
syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 units = 2; }
"""
ORDER = """
syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";

enum Status { STATUS_UNKNOWN = 0; PLACED = 1; SHIPPED = 2; }

message Order {
  int64 id = 1;
  string customer = 2;
  optional double score = 3;
  google.protobuf.Timestamp placed_at = 4;
  message Address { string city = 1; optional int32 zip = 2; }
  Address address = 5;
  repeated string tags = 6;
  map<string, int64> quantities = 7;
  Status status = 8;
  oneof payment { string card = 9; shop.common.Money cash = 10; }
  google.protobuf.Int64Value discount = 11;
  google.protobuf.Struct extra = 12;
  google.protobuf.Duration ttl = 13;
  bool gift = 14;
  bytes blob = 15;
  uint64 big = 16;
  sint32 delta = 17;
  float ratio = 18;
  repeated Address history = 19;
  google.protobuf.Value anything = 20;
  map<int32, Address> by_code = 21;
  Address as_json = 22;
  uint32 small = 23;
}
message Refund { int64 order_id = 1; }
"""
