/*
 * Decoding protobuf Kafka values into table rows inside Spark's JVM (a Java UDF): no Python runs on the
 * executors for protobuf topics. ingest/protobuf_decode.py compiles this file at first use (cached by
 * its hash), registers the UDF and passes the per-batch configuration as a binary literal: the table's
 * fields (Iceberg types), the writer schemas (serialized FileDescriptorSets) by schema id or the one
 * inline schema and message, and the framing. The configuration is parsed once per JVM (cached by
 * hash), each writer message compiled once into readers that fill the table's struct by field name.
 *
 * Mapping and reasons are those documented in ingest/protobuf_decode.py.
 */
package floe.ingest;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.Descriptors.OneofDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;

/** (value bytes, configuration bytes) → Row(record struct or NULL, error reason or NULL). */
public final class ProtobufDecoder implements UDF2<byte[], byte[], Row> {
  private static final long serialVersionUID = 1L;

  /** Parsed configurations by the SHA-256 of their bytes (bounded: a long-running ingest sees a few). */
  private static final Map<String, Decoder> DECODERS =
      java.util.Collections.synchronizedMap(
          new LinkedHashMap<String, Decoder>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Decoder> eldest) {
              return size() > 64;
            }
          });

  // The literal's bytes are the same array on every row of a task: one identity check per row.
  private transient volatile Object[] last;

  @Override
  public Row call(byte[] value, byte[] config) {
    Object[] cached = last;
    Decoder decoder;
    if (cached != null && cached[0] == config) {
      decoder = (Decoder) cached[1];
    } else {
      decoder = decoderFor(config);
      last = new Object[] {config, decoder};
    }
    return decoder.decode(value);
  }

  static Decoder decoderFor(byte[] config) {
    String key = sha256(config);
    Decoder found = DECODERS.get(key);
    if (found == null) {
      found = new Decoder(config);
      DECODERS.put(key, found);
    }
    return found;
  }

  /**
   * Registers the UDF in `session` (a SparkSession; Object for a reflective call through py4j) as `name`
   * with the given result type (Spark's JSON form of the DataType).
   */
  public static void register(Object session, String name, String resultTypeJson) {
    SparkSession spark = (SparkSession) session;
    DataType type = DataType.fromJson(resultTypeJson);
    // Not deterministic for the optimizer: one call per row, never copied into each field extraction.
    UserDefinedFunction udf = functions.udf(new ProtobufDecoder(), type).asNondeterministic();
    spark.udf().register(name, udf);
  }

  private static String sha256(byte[] data) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(data);
      StringBuilder out = new StringBuilder(64);
      for (byte b : digest) {
        out.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
      }
      return out.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  // -- reasons -------------------------------------------------------------------------------------------

  /** Why one value cannot become a row (the dead letter's reason); no stack trace: it is data. */
  static final class RecordError extends Exception {
    private static final long serialVersionUID = 1L;

    RecordError(String reason) {
      super(reason, null, false, false);
    }
  }

  // -- the table's types ---------------------------------------------------------------------------------

  /** An Iceberg type of the table as the configuration describes it. */
  static final class Type {
    final String kind; // boolean, int, long, float, double, string, uuid, binary, fixed, struct, list, map, …
    final String text; // how pyiceberg writes it (reasons quote it)
    final int size; // fixed[size]
    final List<String> names = new ArrayList<>();
    final List<Type> fields = new ArrayList<>();
    final Type element;
    final Type key;
    final Type value;

    Type(JsonNode node) {
      kind = node.get("kind").asText();
      text = node.get("text").asText();
      size = node.path("size").asInt(0);
      for (JsonNode field : node.path("fields")) {
        names.add(field.get("name").asText());
        fields.add(new Type(field.get("type")));
      }
      element = node.has("element") ? new Type(node.get("element")) : null;
      key = node.has("key") ? new Type(node.get("key")) : null;
      value = node.has("value") ? new Type(node.get("value")) : null;
    }

    boolean is(String... kinds) {
      for (String k : kinds) {
        if (kind.equals(k)) {
          return true;
        }
      }
      return false;
    }
  }

  // -- converters: one protobuf value → one Spark value ----------------------------------------------------

  interface Convert {
    Object apply(Object value) throws RecordError;
  }

  interface Read {
    Object read(Message message) throws RecordError;
  }

  static final String TIMESTAMP = "google.protobuf.Timestamp";
  static final String DURATION = "google.protobuf.Duration";
  static final java.util.Set<String> WRAPPERS =
      java.util.Set.of(
          "google.protobuf.DoubleValue",
          "google.protobuf.FloatValue",
          "google.protobuf.Int64Value",
          "google.protobuf.UInt64Value",
          "google.protobuf.Int32Value",
          "google.protobuf.UInt32Value",
          "google.protobuf.BoolValue",
          "google.protobuf.StringValue",
          "google.protobuf.BytesValue");
  static final java.util.Set<String> JSON_TYPES =
      java.util.Set.of("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue");

  static final Convert IDENTITY = v -> v;
  static final Read NONE = m -> null;

  static boolean isMessage(FieldDescriptor f) {
    return f.getJavaType() == FieldDescriptor.JavaType.MESSAGE;
  }

  static String kindOf(FieldDescriptor f) {
    if (isMessage(f)) {
      return f.getMessageType().getFullName();
    }
    if (f.getJavaType() == FieldDescriptor.JavaType.ENUM) {
      return "enum " + f.getEnumType().getFullName();
    }
    return f.getType().name().toLowerCase(java.util.Locale.ROOT);
  }

  static Convert mismatch(String path, String source, Type target) {
    String reason = "field " + path + ": protobuf " + source + " does not fit the table's " + target.text;
    return v -> {
      throw new RecordError(reason);
    };
  }

  static RecordError outOfRange(String path, String value) {
    return new RecordError("field " + path + ": " + value + " is out of range for the table's type");
  }

  static Convert scalar(FieldDescriptor field, Type target, String path) {
    if (isMessage(field)) {
      return messageValue(field.getMessageType(), target, path);
    }
    FieldDescriptor.Type t = field.getType();
    boolean signed32 =
        t == FieldDescriptor.Type.INT32
            || t == FieldDescriptor.Type.SINT32
            || t == FieldDescriptor.Type.SFIXED32;
    boolean signed64 =
        t == FieldDescriptor.Type.INT64
            || t == FieldDescriptor.Type.SINT64
            || t == FieldDescriptor.Type.SFIXED64;
    boolean unsigned32 = t == FieldDescriptor.Type.UINT32 || t == FieldDescriptor.Type.FIXED32;
    boolean unsigned64 = t == FieldDescriptor.Type.UINT64 || t == FieldDescriptor.Type.FIXED64;
    if (target.is("boolean") && t == FieldDescriptor.Type.BOOL) {
      return IDENTITY;
    }
    if (target.is("int")) {
      if (signed32) {
        return IDENTITY;
      }
      if (unsigned32) {
        return v -> {
          long u = Integer.toUnsignedLong((Integer) v);
          if (u > Integer.MAX_VALUE) {
            throw outOfRange(path, Long.toString(u));
          }
          return (int) u;
        };
      }
      if (signed64) {
        return v -> {
          long l = (Long) v;
          if (l < Integer.MIN_VALUE || l > Integer.MAX_VALUE) {
            throw outOfRange(path, Long.toString(l));
          }
          return (int) l;
        };
      }
      if (unsigned64) {
        return v -> {
          long l = (Long) v;
          if (l < 0 || l > Integer.MAX_VALUE) {
            throw outOfRange(path, Long.toUnsignedString(l));
          }
          return (int) l;
        };
      }
    }
    if (target.is("long")) {
      if (signed32) {
        return v -> ((Integer) v).longValue();
      }
      if (unsigned32) {
        return v -> Integer.toUnsignedLong((Integer) v);
      }
      if (signed64) {
        return IDENTITY;
      }
      if (unsigned64) {
        return v -> {
          long l = (Long) v;
          if (l < 0) {
            throw outOfRange(path, Long.toUnsignedString(l));
          }
          return l;
        };
      }
    }
    if (target.is("double", "float")) {
      boolean asFloat = target.is("float");
      if (t == FieldDescriptor.Type.DOUBLE || t == FieldDescriptor.Type.FLOAT || signed32) {
        return asFloat
            ? v -> ((Number) v).floatValue()
            : v -> ((Number) v).doubleValue();
      }
      if (unsigned32) {
        return asFloat
            ? v -> (float) Integer.toUnsignedLong((Integer) v)
            : v -> (double) Integer.toUnsignedLong((Integer) v);
      }
    }
    if (target.is("string", "uuid")) {
      if (t == FieldDescriptor.Type.STRING) {
        return IDENTITY;
      }
      if (t == FieldDescriptor.Type.ENUM && target.is("string")) {
        return v -> enumName((EnumValueDescriptor) v);
      }
    }
    if (target.is("binary") && t == FieldDescriptor.Type.BYTES) {
      return v -> ((ByteString) v).toByteArray();
    }
    if (target.is("fixed") && t == FieldDescriptor.Type.BYTES) {
      int size = target.size;
      return v -> {
        ByteString bytes = (ByteString) v;
        if (bytes.size() != size) {
          throw new RecordError(
              "field " + path + ": " + bytes.size() + " bytes, the table's fixed[" + size + "] needs " + size);
        }
        return bytes.toByteArray();
      };
    }
    return mismatch(path, kindOf(field), target);
  }

  /** An enum value's name; a number the writer's enum does not know (proto3 enums are open) as text. */
  static String enumName(EnumValueDescriptor value) {
    EnumValueDescriptor known = value.getType().findValueByNumber(value.getNumber());
    return known != null ? known.getName() : Integer.toString(value.getNumber());
  }

  static long micros(Message message, FieldDescriptor seconds, FieldDescriptor nanos) {
    long s = (Long) message.getField(seconds);
    int n = (Integer) message.getField(nanos);
    return Math.addExact(Math.multiplyExact(s, 1_000_000L), Math.floorDiv(n, 1000));
  }

  static Convert messageValue(Descriptor message, Type target, String path) {
    String name = message.getFullName();
    if (name.equals(TIMESTAMP) && target.is("timestamptz", "timestamp")) {
      FieldDescriptor seconds = message.findFieldByNumber(1);
      FieldDescriptor nanos = message.findFieldByNumber(2);
      boolean zoned = target.is("timestamptz");
      return v -> {
        Message m = (Message) v;
        try {
          Instant instant = instant(micros(m, seconds, nanos));
          return zoned ? instant : LocalDateTime.ofInstant(instant, ZoneOffset.UTC);
        } catch (ArithmeticException | java.time.DateTimeException e) {
          throw outOfRange(path, "Timestamp " + m.getField(seconds) + " s " + m.getField(nanos) + " ns");
        }
      };
    }
    if (name.equals(DURATION) && target.is("long")) {
      FieldDescriptor seconds = message.findFieldByNumber(1);
      FieldDescriptor nanos = message.findFieldByNumber(2);
      return v -> {
        try {
          return micros((Message) v, seconds, nanos);
        } catch (ArithmeticException e) {
          throw outOfRange(path, JsonPrinter.duration((Message) v));
        }
      };
    }
    if (WRAPPERS.contains(name) && !target.is("struct")) {
      FieldDescriptor inner = message.findFieldByName("value");
      Convert convert = scalar(inner, target, path);
      return v -> convert.apply(((Message) v).getField(inner));
    }
    if (target.is("string") && (JSON_TYPES.contains(name) || name.equals(TIMESTAMP) || name.equals(DURATION))) {
      return v -> JsonPrinter.json((Message) v, path);
    }
    if (target.is("struct")) {
      return struct(message, target, path);
    }
    if (target.is("string")) {
      return v -> JsonPrinter.json((Message) v, path);
    }
    return mismatch(path, name, target);
  }

  static Instant instant(long micros) {
    return Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L);
  }

  static Convert struct(Descriptor message, Type target, String path) {
    Read[] readers = new Read[target.fields.size()];
    for (int i = 0; i < readers.length; i++) {
      String name = target.names.get(i);
      readers[i] = reader(message, name, target.fields.get(i), path.isEmpty() ? name : path + "." + name);
    }
    return v -> row((Message) v, readers);
  }

  static Row row(Message message, Read[] readers) throws RecordError {
    Object[] values = new Object[readers.length];
    for (int i = 0; i < readers.length; i++) {
      values[i] = readers[i].read(message);
    }
    return RowFactory.create(values);
  }

  /** How to read the table field `name` (of type `target`) from a message of type `message`, by name. */
  static Read reader(Descriptor message, String name, Type target, String path) {
    FieldDescriptor field = message.findFieldByName(name);
    if (field == null) {
      for (OneofDescriptor oneof : message.getOneofs()) {
        if (oneof.getName().equals(name) && target.is("struct")) {
          return oneof(message, oneof, target, path);
        }
      }
      return NONE; // not in the writer's schema: NULL (a required one goes to the DLQ)
    }
    if (field.isMapField()) {
      if (!target.is("map")) {
        return readFail(field, mismatch(path, "map", target));
      }
      Descriptor entry = field.getMessageType();
      FieldDescriptor keyField = entry.findFieldByName("key");
      FieldDescriptor valueField = entry.findFieldByName("value");
      Convert key = scalar(keyField, target.key, path + ".key");
      Convert value = scalar(valueField, target.value, path + ".value");
      return m -> {
        int count = m.getRepeatedFieldCount(field);
        Map<Object, Object> out = new LinkedHashMap<>(count * 2);
        for (int i = 0; i < count; i++) {
          Message e = (Message) m.getRepeatedField(field, i);
          out.put(key.apply(e.getField(keyField)), value.apply(e.getField(valueField)));
        }
        return out;
      };
    }
    if (field.isRepeated()) {
      if (!target.is("list")) {
        return readFail(field, mismatch(path, "repeated " + kindOf(field), target));
      }
      Convert element = scalar(field, target.element, path + "[]");
      return m -> {
        int count = m.getRepeatedFieldCount(field);
        List<Object> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
          out.add(element.apply(m.getRepeatedField(field, i)));
        }
        return out;
      };
    }
    Convert convert = scalar(field, target, path);
    if (field.hasPresence()) {
      return m -> m.hasField(field) ? convert.apply(m.getField(field)) : null;
    }
    return m -> convert.apply(m.getField(field));
  }

  // Only a value that is there fails: an empty repeated field or map is no conflict.
  static Read readFail(FieldDescriptor field, Convert fail) {
    return m -> m.getRepeatedFieldCount(field) > 0 ? fail.apply(null) : null;
  }

  static Read oneof(Descriptor message, OneofDescriptor oneof, Type target, String path) {
    Read[] readers = new Read[target.fields.size()];
    for (int i = 0; i < readers.length; i++) {
      String name = target.names.get(i);
      readers[i] = reader(message, name, target.fields.get(i), path + "." + name);
    }
    return m -> m.hasOneof(oneof) ? row(m, readers) : null;
  }

  // -- decoding values -----------------------------------------------------------------------------------

  /** A writer message compiled for the table: its descriptor and one reader per table field. */
  static final class Compiled {
    final Descriptor descriptor;
    final Read[] readers;
    final String corrupt;

    Compiled(Descriptor descriptor, Read[] readers) {
      this.descriptor = descriptor;
      this.readers = readers;
      this.corrupt = "value is not a protobuf " + descriptor.getFullName() + " (truncated or corrupt)";
    }
  }

  /** A writer schema: the serialized FileDescriptorSet and its main file, built on first use. */
  static final class Writer {
    final byte[] descriptorSet;
    final String mainFile;
    private Map<String, FileDescriptor> files;
    private FileDescriptorSet set;

    Writer(byte[] descriptorSet, String mainFile) {
      this.descriptorSet = descriptorSet;
      this.mainFile = mainFile;
    }

    synchronized FileDescriptorSet set() throws InvalidProtocolBufferException {
      if (set == null) {
        set = FileDescriptorSet.parseFrom(descriptorSet);
      }
      return set;
    }

    synchronized Descriptor message(String name) throws RecordError {
      try {
        if (files == null) {
          Map<String, FileDescriptor> built = new HashMap<>();
          for (FileDescriptorProto file : set().getFileList()) {
            FileDescriptor[] dependencies = new FileDescriptor[file.getDependencyCount()];
            for (int i = 0; i < dependencies.length; i++) {
              dependencies[i] = built.get(file.getDependency(i));
              if (dependencies[i] == null) {
                throw new RecordError(
                    "the writer schema cannot be used: " + file.getName() + " imports "
                        + file.getDependency(i) + ", which is not in the schema");
              }
            }
            built.put(file.getName(), FileDescriptor.buildFrom(file, dependencies));
          }
          files = built;
        }
      } catch (InvalidProtocolBufferException | DescriptorValidationException e) {
        throw new RecordError("the writer schema cannot be used: " + e.getMessage());
      }
      for (FileDescriptor file : files.values()) {
        String pkg = file.getPackage();
        if (!pkg.isEmpty() && !name.startsWith(pkg + ".")) {
          continue;
        }
        String rest = pkg.isEmpty() ? name : name.substring(pkg.length() + 1);
        String[] parts = rest.split("\\.");
        Descriptor found = file.findMessageTypeByName(parts[0]);
        for (int i = 1; found != null && i < parts.length; i++) {
          found = found.findNestedTypeByName(parts[i]);
        }
        if (found != null) {
          return found;
        }
      }
      throw new RecordError("the writer schema cannot be used: 'Couldn't find message " + name + "'");
    }

    /** The full name of the message Confluent's message indexes point at. */
    String messageNameAt(int[] indexes) throws RecordError {
      String text = indexesText(indexes);
      FileDescriptorProto file = null;
      try {
        for (FileDescriptorProto f : set().getFileList()) {
          if (f.getName().equals(mainFile)) {
            file = f;
          }
        }
      } catch (InvalidProtocolBufferException e) {
        throw new RecordError("the writer schema cannot be used: " + e.getMessage());
      }
      if (file == null || indexes.length == 0) {
        throw new RecordError("message index " + text + " is not in the schema");
      }
      String name = file.getPackage();
      List<DescriptorProto> messages = file.getMessageTypeList();
      for (int index : indexes) {
        if (index < 0 || index >= messages.size()) {
          throw new RecordError("message index " + text + " is not in the schema");
        }
        DescriptorProto message = messages.get(index);
        name = name.isEmpty() ? message.getName() : name + "." + message.getName();
        messages = message.getNestedTypeList();
      }
      return name;
    }
  }

  static String indexesText(int[] indexes) {
    StringBuilder out = new StringBuilder("[");
    for (int i = 0; i < indexes.length; i++) {
      out.append(i == 0 ? "" : ", ").append(indexes[i]);
    }
    return out.append(']').toString();
  }

  /** One batch configuration: the table's fields, the writer schemas, the framing. */
  static final class Decoder {
    final List<String> names = new ArrayList<>();
    final List<Type> fields = new ArrayList<>();
    final boolean framed;
    final Map<Integer, Writer> writers = new HashMap<>();
    final Map<Integer, String> unusable = new HashMap<>();
    final Writer inlineWriter;
    final String inlineMessage;
    private volatile Object inline; // Compiled or RecordError, on first use
    private final Map<Integer, Object> byId = new ConcurrentHashMap<>(); // indexes [0]
    private final Map<String, Object> byIndexes = new ConcurrentHashMap<>(); // other indexes

    Decoder(byte[] config) {
      try {
        JsonNode root = new ObjectMapper().readTree(new String(config, StandardCharsets.UTF_8));
        for (JsonNode field : root.get("fields")) {
          names.add(field.get("name").asText());
          fields.add(new Type(field.get("type")));
        }
        framed = root.path("framed").asBoolean(true);
        Base64.Decoder base64 = Base64.getDecoder();
        for (Iterator<Map.Entry<String, JsonNode>> it = root.path("writers").fields(); it.hasNext(); ) {
          Map.Entry<String, JsonNode> e = it.next();
          writers.put(
              Integer.parseInt(e.getKey()),
              new Writer(base64.decode(e.getValue().get("descriptor_set").asText()),
                  e.getValue().get("main_file").asText()));
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = root.path("unusable").fields(); it.hasNext(); ) {
          Map.Entry<String, JsonNode> e = it.next();
          unusable.put(Integer.parseInt(e.getKey()), e.getValue().asText());
        }
        JsonNode in = root.path("inline");
        if (in.isObject()) {
          inlineWriter =
              new Writer(base64.decode(in.get("descriptor_set").asText()), in.get("main_file").asText());
          inlineMessage = in.get("message").asText();
        } else {
          inlineWriter = null;
          inlineMessage = null;
        }
      } catch (java.io.IOException e) {
        throw new IllegalArgumentException("floe's protobuf decoder configuration is not valid JSON", e);
      }
    }

    Object compile(Writer writer, String message) {
      try {
        Descriptor descriptor = writer.message(message);
        Read[] readers = new Read[fields.size()];
        for (int i = 0; i < readers.length; i++) {
          readers[i] = reader(descriptor, names.get(i), fields.get(i), names.get(i));
        }
        return new Compiled(descriptor, readers);
      } catch (RecordError e) {
        return e;
      }
    }

    Object forSchema(int schemaId, int[] indexes) {
      Writer writer = writers.get(schemaId);
      if (writer == null) {
        String why = unusable.getOrDefault(schemaId, "is not registered");
        return new RecordError("value's schema id " + schemaId + " " + why);
      }
      try {
        return compile(writer, writer.messageNameAt(indexes));
      } catch (RecordError e) {
        return new RecordError("value's schema id " + schemaId + ": " + e.getMessage());
      }
    }

    Row decode(byte[] value) {
      if (value == null) {
        return RowFactory.create(null, "record has no value (tombstone)");
      }
      try {
        Object compiled;
        int start = 0;
        if (inlineWriter != null) {
          if (framed) {
            start = Framing.split(value).start;
          }
          compiled = inline;
          if (compiled == null) {
            compiled = inline = compile(inlineWriter, inlineMessage);
          }
        } else {
          Framing framing = Framing.split(value);
          start = framing.start;
          if (framing.indexes == null) {
            compiled = byId.computeIfAbsent(framing.schemaId, id -> forSchema(id, new int[] {0}));
          } else {
            String key = framing.schemaId + " " + indexesText(framing.indexes);
            int[] indexes = framing.indexes;
            compiled = byIndexes.computeIfAbsent(key, k -> forSchema(framing.schemaId, indexes));
          }
        }
        if (compiled instanceof RecordError) {
          throw (RecordError) compiled;
        }
        Compiled c = (Compiled) compiled;
        Message message;
        try {
          message =
              DynamicMessage.parseFrom(
                  c.descriptor, CodedInputStream.newInstance(value, start, value.length - start));
        } catch (java.io.IOException | RuntimeException e) {
          throw new RecordError(c.corrupt);
        }
        try {
          return RowFactory.create(row(message, c.readers), null);
        } catch (RuntimeException e) {
          // A value no reader expected must not stop the topic: it goes to the dead letters, named.
          throw new RecordError(
              "value could not be read as the table's row (" + e.getClass().getSimpleName() + ")");
        }
      } catch (RecordError e) {
        return RowFactory.create(null, e.getMessage());
      }
    }
  }

  // -- the Confluent wire format -------------------------------------------------------------------------

  /** Schema id, message indexes (null: [0]) and where the message starts, of a framed value. */
  static final class Framing {
    int schemaId;
    int[] indexes;
    int start;
    private int pos;

    static Framing split(byte[] value) throws RecordError {
      if (value.length < 6 || value[0] != 0) {
        throw new RecordError("value is not in the Confluent wire format (magic byte 0 + schema id)");
      }
      Framing f = new Framing();
      f.schemaId =
          ((value[1] & 0xFF) << 24) | ((value[2] & 0xFF) << 16) | ((value[3] & 0xFF) << 8) | (value[4] & 0xFF);
      if (f.schemaId < 0) {
        throw new RecordError("value is not in the Confluent wire format (negative schema id)");
      }
      if (value[5] == 0) { // [0], the first message: what nearly every value carries
        f.start = 6;
        return f;
      }
      f.pos = 5;
      long count = f.zigzag(value);
      if (count == 0) {
        f.start = f.pos;
        return f;
      }
      if (count < 0 || count > 64) {
        throw new RecordError("value's message indexes are malformed (count " + count + ")");
      }
      int[] indexes = new int[(int) count];
      for (int i = 0; i < count; i++) {
        long index = f.zigzag(value);
        if (index < 0 || index > Integer.MAX_VALUE) {
          throw new RecordError("value's message indexes are malformed (index " + index + ")");
        }
        indexes[i] = (int) index;
      }
      f.indexes = indexes.length == 1 && indexes[0] == 0 ? null : indexes;
      f.start = f.pos;
      return f;
    }

    private long zigzag(byte[] data) throws RecordError {
      long result = 0;
      int shift = 0;
      while (true) {
        if (pos >= data.length) {
          throw new RecordError("value's message indexes are truncated");
        }
        byte b = data[pos++];
        result |= (long) (b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
          return (result >>> 1) ^ -(result & 1);
        }
        shift += 7;
        if (shift > 63) {
          throw new RecordError("value's message indexes are malformed (varint too long)");
        }
      }
    }
  }

  // -- messages as JSON (into string columns) ---------------------------------------------------------------

  /**
   * A message as protobuf's JSON mapping, written the way floe's Python decoder wrote it
   * (`json.dumps(MessageToDict(m), separators=(",", ":"), sort_keys=True)`): lowerCamelCase names, only set
   * fields, 64-bit integers as strings, bytes as base64, keys sorted, non-ASCII escaped.
   */
  static final class JsonPrinter {
    private static final DateTimeFormatter SECONDS =
        DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss").withZone(ZoneOffset.UTC);

    static String json(Message message, String path) throws RecordError {
      StringBuilder out = new StringBuilder();
      write(out, message(message, path));
      return out.toString();
    }

    static Object message(Message m, String path) throws RecordError {
      Descriptor d = m.getDescriptorForType();
      String name = d.getFullName();
      switch (name) {
        case TIMESTAMP:
          return timestamp(m);
        case DURATION:
          return duration(m);
        case "google.protobuf.FieldMask":
          {
            List<String> paths = new ArrayList<>();
            FieldDescriptor f = d.findFieldByNumber(1);
            for (int i = 0; i < m.getRepeatedFieldCount(f); i++) {
              paths.add(camel((String) m.getRepeatedField(f, i)));
            }
            return String.join(",", paths);
          }
        case "google.protobuf.Struct":
          {
            FieldDescriptor f = d.findFieldByNumber(1);
            Map<String, Object> out = new TreeMap<>();
            for (int i = 0; i < m.getRepeatedFieldCount(f); i++) {
              Message e = (Message) m.getRepeatedField(f, i);
              Descriptor ed = e.getDescriptorForType();
              out.put((String) e.getField(ed.findFieldByNumber(1)),
                  message((Message) e.getField(ed.findFieldByNumber(2)), path));
            }
            return out;
          }
        case "google.protobuf.ListValue":
          {
            FieldDescriptor f = d.findFieldByNumber(1);
            List<Object> out = new ArrayList<>();
            for (int i = 0; i < m.getRepeatedFieldCount(f); i++) {
              out.add(message((Message) m.getRepeatedField(f, i), path));
            }
            return out;
          }
        case "google.protobuf.Value":
          {
            OneofDescriptor kind = d.getOneofs().get(0);
            FieldDescriptor set = m.getOneofFieldDescriptor(kind);
            if (set == null || set.getName().equals("null_value")) {
              return null;
            }
            Object v = m.getField(set);
            if (set.getName().equals("number_value")) {
              double n = (Double) v;
              if (Double.isNaN(n) || Double.isInfinite(n)) {
                throw new RecordError("field " + path + ": a Value's number " + n + " has no JSON form");
              }
              return n;
            }
            return field(set, v, path);
          }
        default:
          if (WRAPPERS.contains(name)) {
            FieldDescriptor f = d.findFieldByName("value");
            return field(f, m.getField(f), path);
          }
      }
      Map<String, Object> out = new TreeMap<>();
      for (Map.Entry<FieldDescriptor, Object> e : m.getAllFields().entrySet()) {
        FieldDescriptor f = e.getKey();
        String key = f.isExtension() ? "[" + f.getFullName() + "]" : f.getJsonName();
        if (f.isMapField()) {
          Map<String, Object> entries = new TreeMap<>();
          Descriptor entry = f.getMessageType();
          FieldDescriptor kf = entry.findFieldByName("key");
          FieldDescriptor vf = entry.findFieldByName("value");
          for (Object item : (List<?>) e.getValue()) {
            Message em = (Message) item;
            Object k = em.getField(kf);
            entries.put(k instanceof Boolean ? ((Boolean) k ? "true" : "false") : unsignedText(kf, k),
                field(vf, em.getField(vf), path));
          }
          out.put(key, entries);
        } else if (f.isRepeated()) {
          List<Object> items = new ArrayList<>();
          for (Object item : (List<?>) e.getValue()) {
            items.add(field(f, item, path));
          }
          out.put(key, items);
        } else {
          out.put(key, field(f, e.getValue(), path));
        }
      }
      return out;
    }

    static String unsignedText(FieldDescriptor f, Object v) {
      switch (f.getType()) {
        case UINT32:
        case FIXED32:
          return Long.toString(Integer.toUnsignedLong((Integer) v));
        case UINT64:
        case FIXED64:
          return Long.toUnsignedString((Long) v);
        default:
          return String.valueOf(v);
      }
    }

    static Object field(FieldDescriptor f, Object v, String path) throws RecordError {
      switch (f.getType()) {
        case MESSAGE:
        case GROUP:
          return message((Message) v, path);
        case ENUM:
          {
            EnumValueDescriptor e = (EnumValueDescriptor) v;
            if (e.getType().getFullName().equals("google.protobuf.NullValue")) {
              return null;
            }
            EnumValueDescriptor known = e.getType().findValueByNumber(e.getNumber());
            return known != null ? (Object) known.getName() : (Object) (long) e.getNumber();
          }
        case BYTES:
          return Base64.getEncoder().encodeToString(((ByteString) v).toByteArray());
        case INT64:
        case SINT64:
        case SFIXED64:
        case UINT64:
        case FIXED64:
          return unsignedText(f, v); // 64-bit integers are strings in protobuf's JSON
        case UINT32:
        case FIXED32:
          return Integer.toUnsignedLong((Integer) v);
        case INT32:
        case SINT32:
        case SFIXED32:
          return ((Integer) v).longValue();
        case FLOAT:
          {
            float x = (Float) v;
            if (Float.isNaN(x) || Float.isInfinite(x)) {
              return Float.isNaN(x) ? "NaN" : (x > 0 ? "Infinity" : "-Infinity");
            }
            return Double.parseDouble(Float.toString(x)); // the shortest form that reads back as the float
          }
        case DOUBLE:
          {
            double x = (Double) v;
            if (Double.isNaN(x) || Double.isInfinite(x)) {
              return Double.isNaN(x) ? "NaN" : (x > 0 ? "Infinity" : "-Infinity");
            }
            return x;
          }
        default:
          return v; // bool, string
      }
    }

    static String timestamp(Message m) {
      Descriptor d = m.getDescriptorForType();
      long seconds = (Long) m.getField(d.findFieldByNumber(1));
      int nanos = (Integer) m.getField(d.findFieldByNumber(2));
      return SECONDS.format(Instant.ofEpochSecond(seconds)) + fraction(nanos) + "Z";
    }

    static String duration(Message m) {
      Descriptor d = m.getDescriptorForType();
      long seconds = (Long) m.getField(d.findFieldByNumber(1));
      int nanos = (Integer) m.getField(d.findFieldByNumber(2));
      String sign = seconds < 0 || nanos < 0 ? "-" : "";
      return sign + Math.abs(seconds) + fraction(Math.abs(nanos)) + "s";
    }

    static String fraction(int nanos) {
      if (nanos == 0) {
        return "";
      }
      if (nanos % 1_000_000 == 0) {
        return String.format(".%03d", nanos / 1_000_000);
      }
      if (nanos % 1000 == 0) {
        return String.format(".%06d", nanos / 1000);
      }
      return String.format(".%09d", nanos);
    }

    static String camel(String name) {
      StringBuilder out = new StringBuilder();
      boolean upper = false;
      for (char c : name.toCharArray()) {
        if (c == '_') {
          upper = true;
        } else {
          out.append(upper ? Character.toUpperCase(c) : c);
          upper = false;
        }
      }
      return out.toString();
    }

    static void write(StringBuilder out, Object v) {
      if (v == null) {
        out.append("null");
      } else if (v instanceof String) {
        string(out, (String) v);
      } else if (v instanceof Boolean) {
        out.append(((Boolean) v) ? "true" : "false");
      } else if (v instanceof Long) {
        out.append((long) (Long) v);
      } else if (v instanceof Double) {
        out.append(pythonFloat((Double) v));
      } else if (v instanceof Map) {
        out.append('{');
        boolean first = true;
        for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
          out.append(first ? "" : ",");
          first = false;
          string(out, (String) e.getKey());
          out.append(':');
          write(out, e.getValue());
        }
        out.append('}');
      } else if (v instanceof List) {
        out.append('[');
        boolean first = true;
        for (Object item : (List<?>) v) {
          out.append(first ? "" : ",");
          first = false;
          write(out, item);
        }
        out.append(']');
      } else {
        string(out, v.toString());
      }
    }

    static void string(StringBuilder out, String s) {
      out.append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        switch (c) {
          case '"':
            out.append("\\\"");
            break;
          case '\\':
            out.append("\\\\");
            break;
          case '\n':
            out.append("\\n");
            break;
          case '\r':
            out.append("\\r");
            break;
          case '\t':
            out.append("\\t");
            break;
          case '\b':
            out.append("\\b");
            break;
          case '\f':
            out.append("\\f");
            break;
          default:
            if (c < 0x20 || c > 0x7E) { // Python's ensure_ascii: everything outside space..~ escaped
              out.append(String.format("\\u%04x", (int) c));
            } else {
              out.append(c);
            }
        }
      }
      out.append('"');
    }

    /** A double as Python's repr writes it (shortest digits; exponent form below 1e-4 and from 1e16). */
    static String pythonFloat(double x) {
      if (x == 0) {
        return (1 / x < 0) ? "-0.0" : "0.0";
      }
      BigDecimal d = new BigDecimal(Double.toString(x)).stripTrailingZeros();
      String digits = d.unscaledValue().abs().toString();
      int exponent = digits.length() - 1 - d.scale(); // x = d.ddd × 10^exponent
      String sign = x < 0 ? "-" : "";
      if (exponent < -4 || exponent >= 16) {
        String mantissa = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
        String exp = String.format("%02d", Math.abs(exponent));
        return sign + mantissa + "e" + (exponent < 0 ? "-" : "+") + exp;
      }
      if (exponent < 0) {
        return sign + "0." + "0".repeat(-exponent - 1) + digits;
      }
      if (digits.length() <= exponent + 1) {
        return sign + digits + "0".repeat(exponent + 1 - digits.length()) + ".0";
      }
      return sign + digits.substring(0, exponent + 1) + "." + digits.substring(exponent + 1);
    }
  }
}
