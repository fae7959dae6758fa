/*
 * Decoding JSON Kafka values into table rows in one pass over their UTF-8 bytes (a DecodeValue
 * expression; ingest/decode.py `decode_json`). The rows hold Spark's internal values (UTF8String,
 * microseconds, days, Decimal, GenericArrayData), so nothing converts them after the decoder.
 *
 * Spark's `from_json` reads each value through a per-value InputStreamReader (UTF-8 decoded to chars,
 * then Jackson's char parser), and floe needed a second scan for the keys a table does not declare.
 * This decoder gives Jackson the value's bytes (its byte parser), fills the table's struct and lists
 * the undeclared top-level keys in the same pass.
 *
 * It reads values the way Spark's JSON reader does with its default options (single-quoted strings
 * and NaN/Infinity allowed; a long takes an integral number only, a string takes any JSON value as its
 * text, a timestamp takes ISO text or epoch seconds, a date ISO text, a decimal a number or numeric
 * text rounded half-up to the scale, binary base64 text; fields not declared are skipped, a repeated
 * key's last value wins, in a map too, where Spark kept both entries). Stricter than Spark, on purpose:
 * an empty value, text after the object and bytes that are not UTF-8 are refused (Spark turned the
 * first into a row of NULLs, ignored the second and replaced the third with U+FFFD), so such records go
 * to the dead-letter table instead of landing changed. tests/e2e/test_json_decoder.py
 * compares the two on the same values.
 *
 * Result: the table's fields, then `corrupt` (non-NULL when the value cannot become a row) and
 * `undeclared` (the object's top-level keys the table does not declare, in order, each once).
 */
package floe.ingest;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonFactoryBuilder;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.catalyst.util.RebaseDateTime;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;

/** value bytes → row(the table's fields..., corrupt, undeclared), in Spark's internal values. */
public final class JsonDecoder implements DecodeValue.Decoder {
  private static final long serialVersionUID = 1L;

  // Spark's JSONOptions defaults (allowSingleQuotes and allowNonNumericNumbers on, the rest off).
  private static final JsonFactory FACTORY =
      new JsonFactoryBuilder()
          .enable(JsonReadFeature.ALLOW_SINGLE_QUOTES)
          .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
          .streamReadConstraints(
              StreamReadConstraints.builder().maxStringLength(Integer.MAX_VALUE).build())
          .build();
  private static final UTF8String CORRUPT =
      UTF8String.fromString("value is not a JSON object matching the table schema");

  /** Why a value cannot become a row: thrown per bad value, so no stack trace is filled in. */
  private static final class Refused extends RuntimeException {
    private static final long serialVersionUID = 1L;
    static final Refused INSTANCE = new Refused();

    private Refused() {
      super("refused", null, false, false);
    }
  }

  private final StructType resultType;
  private final String zone;
  private transient Struct root;
  private transient Object[] failed;

  JsonDecoder(StructType resultType, String zone) {
    this.resultType = resultType;
    this.zone = zone;
  }

  /**
   * Registers the decoder in `session` (a SparkSession; Object for a reflective call through py4j) as
   * the function `name` (DecodeValue). `resultTypeJson` is the result's Spark type (JSON form): the table's fields, then the
   * corrupt (string) and undeclared (array of strings) columns. Refuses, with IllegalArgumentException,
   * a type it does not read (a map whose keys are not strings).
   */
  public static void register(Object session, String name, String resultTypeJson) {
    SparkSession spark = (SparkSession) session;
    StructType type = (StructType) DataType.fromJson(resultTypeJson);
    JsonDecoder decoder = new JsonDecoder(type, spark.conf().get("spark.sql.session.timeZone"));
    decoder.compile(); // refuse unsupported types now, on the driver
    DecodeValue.register(spark, name, decoder, type);
  }

  private Struct compile() {
    if (root == null) {
      ZoneId zoneId = DateTimeUtils.getZoneId(zone);
      StructField[] fields = resultType.fields();
      StructField[] declared = java.util.Arrays.copyOf(fields, fields.length - 2);
      root = new Struct(new StructType(declared), zoneId);
      failed = new Object[fields.length];
      failed[fields.length - 2] = CORRUPT;
    }
    return root;
  }

  @Override
  public InternalRow apply(byte[] value) {
    if (value == null) {
      return null;
    }
    Struct struct = compile();
    Object[] out = new Object[struct.names.size() + 2];
    try (JsonParser parser = FACTORY.createParser(value)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return failed();
      }
      Set<String> undeclared = struct.fill(parser, value, out, true);
      if (parser.nextToken() != null) { // text after the object
        return failed();
      }
      out[out.length - 1] = undeclared == null ? NO_KEYS : texts(undeclared);
      return new GenericInternalRow(out);
    } catch (IOException | RuntimeException e) { // not JSON, not UTF-8, or a value of the wrong type
      return failed();
    }
  }

  /** The row of a value that cannot become one: NULL fields, `corrupt` set. */
  private InternalRow failed() {
    return new GenericInternalRow(failed.clone());
  }

  private static final GenericArrayData NO_KEYS = new GenericArrayData(new Object[0]);

  private static GenericArrayData texts(Set<String> keys) {
    Object[] values = new Object[keys.size()];
    int i = 0;
    for (String key : keys) {
      values[i++] = UTF8String.fromString(key);
    }
    return new GenericArrayData(values);
  }

  // -- converters -----------------------------------------------------------------------------------------

  /**
   * Reads the value at the parser's current token (never a field name) as one Spark type; `source` is
   * the bytes the parser reads.
   */
  private abstract static class Reader implements Serializable {
    private static final long serialVersionUID = 1L;

    abstract Object read(JsonParser parser, byte[] source) throws IOException;
  }

  private static Reader readerFor(DataType type, ZoneId zone) {
    if (type instanceof StringType) {
      return new Text();
    }
    if (type instanceof BooleanType) {
      return new Bool();
    }
    if (type instanceof IntegerType) {
      return new Int();
    }
    if (type instanceof LongType) {
      return new Long64();
    }
    if (type instanceof FloatType || type instanceof DoubleType) {
      return new FloatingPoint(type instanceof FloatType);
    }
    if (type instanceof DecimalType decimal) {
      return new Dec(decimal.precision(), decimal.scale());
    }
    if (type instanceof TimestampType) {
      return new Timestamp(zone);
    }
    if (type instanceof TimestampNTZType) {
      return new TimestampNtz();
    }
    if (type instanceof DateType) {
      return new Date();
    }
    if (type instanceof BinaryType) {
      return new Binary();
    }
    if (type instanceof StructType struct) {
      return new Struct(struct, zone);
    }
    if (type instanceof ArrayType array) {
      return new Array(readerFor(array.elementType(), zone));
    }
    if (type instanceof MapType map) {
      if (!(map.keyType() instanceof StringType)) {
        throw new IllegalArgumentException("JSON maps with " + map.keyType().simpleString() + " keys");
      }
      return new MapOf(readerFor(map.valueType(), zone));
    }
    throw new IllegalArgumentException("JSON values of type " + type.simpleString());
  }

  /** Any JSON value: a string's text, anything else as compact JSON text (Spark's generator copy). */
  private static final class Text extends Reader {
    private static final long serialVersionUID = 1L;

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      JsonToken token = parser.currentToken();
      if (token == JsonToken.VALUE_STRING) {
        return text(parser, source);
      }
      ByteArrayOutputStream bytes = new ByteArrayOutputStream(64);
      try (JsonGenerator generator = FACTORY.createGenerator(bytes, JsonEncoding.UTF8)) {
        generator.copyCurrentStructure(parser);
      }
      return UTF8String.fromBytes(bytes.toByteArray());
    }
  }

  /**
   * The string at the parser's current token. When its bytes between the quotes are as many as its
   * characters, every byte is one ASCII character and no escape: the text is a copy of those bytes
   * (the usual case; one copy instead of a String and its UTF-8 encoding). Otherwise Jackson's text.
   */
  private static UTF8String text(JsonParser parser, byte[] source) throws IOException {
    long quote = parser.currentTokenLocation().getByteOffset();
    int length = parser.getTextLength(); // finishes reading the string, without making a String
    long end = parser.currentLocation().getByteOffset(); // just after the closing quote
    if (quote >= 0 && end - quote - 2 == length && end <= source.length) {
      int from = (int) quote + 1;
      return UTF8String.fromBytes(java.util.Arrays.copyOfRange(source, from, from + length));
    }
    return UTF8String.fromString(parser.getText());
  }

  private static final class Bool extends Reader {
    private static final long serialVersionUID = 1L;

    @Override
    Object read(JsonParser parser, byte[] source) {
      return switch (parser.currentToken()) {
        case VALUE_TRUE -> Boolean.TRUE;
        case VALUE_FALSE -> Boolean.FALSE;
        default -> throw Refused.INSTANCE;
      };
    }
  }

  private static final class Int extends Reader {
    private static final long serialVersionUID = 1L;

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      if (parser.currentToken() != JsonToken.VALUE_NUMBER_INT) {
        throw Refused.INSTANCE;
      }
      return parser.getIntValue(); // out of range: Jackson refuses
    }
  }

  private static final class Long64 extends Reader {
    private static final long serialVersionUID = 1L;

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      if (parser.currentToken() != JsonToken.VALUE_NUMBER_INT) {
        throw Refused.INSTANCE;
      }
      return parser.getLongValue();
    }
  }

  /** The non-finite spellings Spark's reader takes as text for a float or a double (1 = +, -1 = -). */
  private static int nonFinite(String text) {
    return switch (text) {
      case "NaN" -> 0;
      case "+INF", "+Infinity", "Infinity" -> 1;
      case "-INF", "-Infinity" -> -1;
      default -> throw Refused.INSTANCE;
    };
  }

  /** A float or a double: any JSON number, or the non-finite spellings Spark's reader takes as text. */
  private static final class FloatingPoint extends Reader {
    private static final long serialVersionUID = 1L;
    private final boolean single;

    FloatingPoint(boolean single) {
      this.single = single;
    }

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      JsonToken token = parser.currentToken();
      double value;
      if (token == JsonToken.VALUE_NUMBER_INT || token == JsonToken.VALUE_NUMBER_FLOAT) {
        if (single) {
          return parser.getFloatValue();
        }
        value = parser.getDoubleValue();
      } else if (token == JsonToken.VALUE_STRING) {
        int sign = nonFinite(parser.getText());
        value = sign == 0 ? Double.NaN : sign > 0 ? Double.POSITIVE_INFINITY : Double.NEGATIVE_INFINITY;
      } else {
        throw Refused.INSTANCE;
      }
      return single ? (Object) (float) value : (Object) value;
    }
  }

  private static final class Dec extends Reader {
    private static final long serialVersionUID = 1L;
    private final int precision;
    private final int scale;

    Dec(int precision, int scale) {
      this.precision = precision;
      this.scale = scale;
    }

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      JsonToken token = parser.currentToken();
      BigDecimal number;
      if (token == JsonToken.VALUE_NUMBER_INT || token == JsonToken.VALUE_NUMBER_FLOAT) {
        number = parser.getDecimalValue();
      } else if (token == JsonToken.VALUE_STRING && parser.getTextLength() >= 1) {
        // Spark's decimal parser for its default locale: grouping commas dropped.
        number = new BigDecimal(parser.getText().replace(",", ""));
      } else {
        throw Refused.INSTANCE;
      }
      BigDecimal scaled = number.setScale(scale, RoundingMode.HALF_UP);
      if (scaled.precision() > precision) {
        throw Refused.INSTANCE;
      }
      return Decimal.apply(scaled, precision, scale);
    }
  }

  private static UTF8String nonEmptyText(JsonParser parser) throws IOException {
    if (parser.currentToken() != JsonToken.VALUE_STRING || parser.getTextLength() < 1) {
      throw Refused.INSTANCE;
    }
    return UTF8String.fromString(parser.getText());
  }

  private static long micros(Option<?> parsed) {
    if (parsed.isEmpty()) {
      throw Refused.INSTANCE;
    }
    return (Long) parsed.get();
  }

  private static final class Timestamp extends Reader {
    private static final long serialVersionUID = 1L;
    private final ZoneId zone;
    private final ZoneOffset fixed; // the zone's offset when it never changes (UTC), else null

    Timestamp(ZoneId zone) {
      this.zone = zone;
      this.fixed = zone.normalized() instanceof ZoneOffset offset ? offset : null;
    }

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      long micros;
      if (parser.currentToken() == JsonToken.VALUE_NUMBER_INT) {
        micros = parser.getLongValue() * 1_000_000L; // epoch seconds, as Spark reads them
      } else {
        micros = parser.currentToken() == JsonToken.VALUE_STRING ? isoMicros(parser, fixed) : NOT_ISO;
        if (micros == NOT_ISO) {
          UTF8String text = DateTimeUtils.cleanLegacyTimestampStr(nonEmptyText(parser));
          micros = micros(DateTimeUtils.stringToTimestamp(text, zone));
        }
      }
      return micros;
    }
  }

  private static final long NOT_ISO = Long.MIN_VALUE;

  /**
   * The common case read without Spark's parser: `yyyy-MM-dd(T| )HH:mm:ss[.f{1,6}]` then `Z` or
   * `(+|-)HH:mm` (or nothing, when the session's time zone has a fixed offset), read straight from the
   * parser's characters. Spark's parser reads these to the same instant but compiles two regular
   * expressions per offset it meets (10% of the decoder's time on ISO timestamps). Anything else
   * (other layouts, out-of-range fields, surrounding spaces) is NOT_ISO: Spark's parser decides.
   */
  private static long isoMicros(JsonParser parser, ZoneOffset fixed) throws IOException {
    char[] c = parser.getTextCharacters();
    int at = parser.getTextOffset();
    int n = parser.getTextLength();
    if (n < 19 || c[at + 4] != '-' || c[at + 7] != '-' || (c[at + 10] != 'T' && c[at + 10] != ' ')
        || c[at + 13] != ':' || c[at + 16] != ':') {
      return NOT_ISO;
    }
    int year = digits(c, at, 4);
    int month = digits(c, at + 5, 2);
    int day = digits(c, at + 8, 2);
    int hour = digits(c, at + 11, 2);
    int minute = digits(c, at + 14, 2);
    int second = digits(c, at + 17, 2);
    if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0
        || minute > 59 || second < 0 || second > 59 || day > LocalDate.of(year, month, 1).lengthOfMonth()) {
      return NOT_ISO;
    }
    int i = 19;
    long fraction = 0;
    if (i < n && c[at + i] == '.') {
      int first = ++i;
      while (i < n && c[at + i] >= '0' && c[at + i] <= '9') {
        fraction = fraction * 10 + (c[at + i] - '0');
        i++;
      }
      int count = i - first;
      if (count < 1 || count > 6) {
        return NOT_ISO;
      }
      for (int k = count; k < 6; k++) {
        fraction *= 10;
      }
    }
    int offsetSeconds;
    if (i == n) {
      if (fixed == null) {
        return NOT_ISO; // a region's rules decide the offset: Spark's parser
      }
      offsetSeconds = fixed.getTotalSeconds();
    } else if (i + 1 == n && c[at + i] == 'Z') {
      offsetSeconds = 0;
    } else if (i + 6 == n && (c[at + i] == '+' || c[at + i] == '-') && c[at + i + 3] == ':') {
      int offsetHours = digits(c, at + i + 1, 2);
      int offsetMinutes = digits(c, at + i + 4, 2);
      if (offsetHours < 0 || offsetHours > 17 || offsetMinutes < 0 || offsetMinutes > 59) {
        return NOT_ISO;
      }
      offsetSeconds = (offsetHours * 3600 + offsetMinutes * 60) * (c[at + i] == '-' ? -1 : 1);
    } else {
      return NOT_ISO;
    }
    long days = LocalDate.of(year, month, day).toEpochDay();
    long seconds = days * 86_400L + hour * 3600L + minute * 60L + second - offsetSeconds;
    return seconds * 1_000_000L + fraction;
  }

  /** The non-negative number written by `count` ASCII digits at `from`, or -1. */
  private static int digits(char[] c, int from, int count) {
    int value = 0;
    for (int k = from; k < from + count; k++) {
      if (c[k] < '0' || c[k] > '9') {
        return -1;
      }
      value = value * 10 + (c[k] - '0');
    }
    return value;
  }

  private static final class TimestampNtz extends Reader {
    private static final long serialVersionUID = 1L;

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      return micros(DateTimeUtils.stringToTimestampWithoutTimeZone(nonEmptyText(parser), false));
    }
  }

  private static final class Date extends Reader {
    private static final long serialVersionUID = 1L;

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      String raw = nonEmptyText(parser).toString();
      Option<?> parsed = DateTimeUtils.stringToDate(DateTimeUtils.cleanLegacyTimestampStr(UTF8String.fromString(raw)));
      int days;
      if (parsed.isDefined()) {
        days = (Integer) parsed.get();
      } else {
        try { // Spark 1.5 wrote dates as their day number in text; Spark's reader still takes it
          days = RebaseDateTime.rebaseJulianToGregorianDays(Integer.parseInt(raw));
        } catch (NumberFormatException e) {
          throw Refused.INSTANCE;
        }
      }
      return days;
    }
  }

  private static final class Binary extends Reader {
    private static final long serialVersionUID = 1L;

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      if (parser.currentToken() != JsonToken.VALUE_STRING) {
        throw Refused.INSTANCE;
      }
      return parser.getBinaryValue();
    }
  }

  private static final class Array extends Reader {
    private static final long serialVersionUID = 1L;
    private final Reader element;

    Array(Reader element) {
      this.element = element;
    }

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      if (parser.currentToken() != JsonToken.START_ARRAY) {
        throw Refused.INSTANCE;
      }
      List<Object> values = new ArrayList<>();
      JsonToken token;
      while ((token = parser.nextToken()) != JsonToken.END_ARRAY) {
        if (token == null) {
          throw Refused.INSTANCE;
        }
        values.add(token == JsonToken.VALUE_NULL ? null : element.read(parser, source));
      }
      return new GenericArrayData(values.toArray());
    }
  }

  private static final class MapOf extends Reader {
    private static final long serialVersionUID = 1L;
    private final Reader value;

    MapOf(Reader value) {
      this.value = value;
    }

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      if (parser.currentToken() != JsonToken.START_OBJECT) {
        throw Refused.INSTANCE;
      }
      Map<String, Object> entries = new LinkedHashMap<>();
      String key;
      while ((key = parser.nextFieldName()) != null) {
        JsonToken token = parser.nextToken();
        entries.put(key, token == JsonToken.VALUE_NULL ? null : value.read(parser, source));
      }
      if (parser.currentToken() != JsonToken.END_OBJECT) {
        throw Refused.INSTANCE;
      }
      Object[] keys = new Object[entries.size()];
      Object[] values = new Object[entries.size()];
      int i = 0;
      for (Map.Entry<String, Object> entry : entries.entrySet()) {
        keys[i] = UTF8String.fromString(entry.getKey());
        values[i++] = entry.getValue();
      }
      return new ArrayBasedMapData(new GenericArrayData(keys), new GenericArrayData(values));
    }
  }

  private static final class Struct extends Reader {
    private static final long serialVersionUID = 1L;
    final Map<String, Integer> names = new HashMap<>();
    private final Reader[] readers;

    Struct(StructType type, ZoneId zone) {
      StructField[] fields = type.fields();
      readers = new Reader[fields.length];
      for (int i = 0; i < fields.length; i++) {
        names.put(fields[i].name(), i);
        readers[i] = readerFor(fields[i].dataType(), zone);
      }
    }

    @Override
    Object read(JsonParser parser, byte[] source) throws IOException {
      if (parser.currentToken() != JsonToken.START_OBJECT) {
        throw Refused.INSTANCE;
      }
      Object[] values = new Object[readers.length];
      fill(parser, source, values, false);
      return new GenericInternalRow(values);
    }

    /**
     * Reads the object the parser is at (START_OBJECT) into `values` by field name; with `listKeys`,
     * the keys not declared (NULL when none).
     */
    Set<String> fill(JsonParser parser, byte[] source, Object[] values, boolean listKeys) throws IOException {
      Set<String> undeclared = null;
      String key;
      while ((key = parser.nextFieldName()) != null) {
        JsonToken token = parser.nextToken();
        Integer index = names.get(key);
        if (index == null) {
          parser.skipChildren();
          if (listKeys) {
            if (undeclared == null) {
              undeclared = new LinkedHashSet<>();
            }
            undeclared.add(key);
          }
        } else {
          values[index] = token == JsonToken.VALUE_NULL ? null : readers[index].read(parser, source);
        }
      }
      if (parser.currentToken() != JsonToken.END_OBJECT) {
        throw Refused.INSTANCE;
      }
      return undeclared;
    }
  }
}
