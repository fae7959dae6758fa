/*
 * The top-level keys of a JSON object value that a table does not declare, found by one scan over the
 * value's UTF-8 bytes (a Java UDF; ingest/decode.py `undeclared_keys`).
 *
 * Spark's `array_except(json_object_keys(value), declared)` parsed every value a second time with Jackson
 * (after `from_json`), through a per-value InputStreamReader: 13% of `floe ingest`'s executor time on
 * 1 KiB JSON (Java Flight Recorder, benchmarks/results/ingest-json-tuning.md). This scan allocates
 * nothing for a value whose keys are all declared (the usual case): keys are compared as bytes.
 *
 * Its answer matters only for values `from_json` accepted (valid JSON objects, Spark's default options:
 * single-quoted strings allowed); for anything it cannot read it returns null, never throws (a thrown
 * exception would fail the batch).
 */
package floe.ingest;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

public final class JsonUndeclaredKeys implements UDF1<byte[], String[]> {
  private static final long serialVersionUID = 1L;
  private static final String[] NONE = new String[0];

  // The declared names' UTF-8 bytes, by length (a key is compared only with names of its length).
  private final byte[][][] declaredByLength;
  private final Set<String> declared;

  JsonUndeclaredKeys(String[] names) {
    int longest = 0;
    byte[][] encoded = new byte[names.length][];
    for (int i = 0; i < names.length; i++) {
      encoded[i] = names[i].getBytes(StandardCharsets.UTF_8);
      longest = Math.max(longest, encoded[i].length);
    }
    List<List<byte[]>> byLength = new ArrayList<>();
    for (int i = 0; i <= longest; i++) {
      byLength.add(new ArrayList<>());
    }
    for (byte[] name : encoded) {
      byLength.get(name.length).add(name);
    }
    declaredByLength = new byte[longest + 1][][];
    for (int i = 0; i <= longest; i++) {
      declaredByLength[i] = byLength.get(i).toArray(new byte[0][]);
    }
    declared = Set.of(java.util.Arrays.stream(names).distinct().toArray(String[]::new));
  }

  /** Register the UDF in `session` as `name` for a table declaring `names` (array<string> result). */
  public static void register(Object session, String name, String[] names) {
    SparkSession spark = (SparkSession) session;
    UserDefinedFunction udf =
        functions.udf(new JsonUndeclaredKeys(names), DataTypes.createArrayType(DataTypes.StringType));
    spark.udf().register(name, udf);
  }

  @Override
  public String[] call(byte[] value) {
    if (value == null) {
      return null;
    }
    try {
      return scan(value);
    } catch (RuntimeException e) { // malformed beyond what the scan expects: unknown, like json_object_keys
      return null;
    }
  }

  private String[] scan(byte[] v) {
    int n = v.length;
    int i = skipSpace(v, 0);
    if (i >= n || v[i] != '{') {
      return null;
    }
    i = skipSpace(v, i + 1);
    if (i < n && v[i] == '}') {
      return NONE;
    }
    Set<String> found = null;
    while (true) {
      if (i >= n || (v[i] != '"' && v[i] != '\'')) {
        return null;
      }
      byte quote = v[i];
      int start = i + 1;
      int end = start;
      boolean escaped = false;
      while (end < n && v[end] != quote) {
        if (v[end] == '\\') {
          escaped = true;
          end++;
        }
        end++;
      }
      if (end >= n) {
        return null;
      }
      if (escaped || !isDeclared(v, start, end - start)) {
        String key = escaped ? unescape(v, start, end) : new String(v, start, end - start, StandardCharsets.UTF_8);
        if (!declared.contains(key)) {
          if (found == null) {
            found = new LinkedHashSet<>();
          }
          found.add(key);
        }
      }
      i = skipSpace(v, end + 1);
      if (i >= n || v[i] != ':') {
        return null;
      }
      i = skipValue(v, skipSpace(v, i + 1));
      i = skipSpace(v, i);
      if (i >= n) {
        return null;
      }
      if (v[i] == '}') {
        break;
      }
      if (v[i] != ',') {
        return null;
      }
      i = skipSpace(v, i + 1);
    }
    return found == null ? NONE : found.toArray(NONE);
  }

  private boolean isDeclared(byte[] v, int start, int length) {
    if (length >= declaredByLength.length) {
      return false;
    }
    for (byte[] name : declaredByLength[length]) {
      boolean same = true;
      for (int k = 0; k < length; k++) {
        if (name[k] != v[start + k]) {
          same = false;
          break;
        }
      }
      if (same) {
        return true;
      }
    }
    return false;
  }

  private static int skipSpace(byte[] v, int i) {
    while (i < v.length && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r')) {
      i++;
    }
    return i;
  }

  /** The index just past the JSON value starting at `i` (a string, an object, an array or a scalar). */
  private static int skipValue(byte[] v, int i) {
    int n = v.length;
    int depth = 0;
    while (i < n) {
      byte c = v[i];
      if (c == '"' || c == '\'') {
        i = skipString(v, i);
        if (depth == 0) {
          return i;
        }
        continue;
      }
      if (c == '{' || c == '[') {
        depth++;
      } else if (c == '}' || c == ']') {
        if (depth == 0) {
          return i; // the end of the enclosing object: a scalar ended here
        }
        depth--;
        if (depth == 0) {
          return i + 1;
        }
      } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
        return i; // a scalar (number, true, false, null, NaN...) ended
      }
      i++;
    }
    return i;
  }

  private static int skipString(byte[] v, int i) {
    byte quote = v[i];
    i++;
    while (i < v.length && v[i] != quote) {
      i += v[i] == '\\' ? 2 : 1;
    }
    return i + 1;
  }

  /** A quoted key with escapes, decoded as JSON (and Jackson with single quotes allowed) decodes it. */
  private static String unescape(byte[] v, int start, int end) {
    String raw = new String(v, start, end - start, StandardCharsets.UTF_8);
    StringBuilder out = new StringBuilder(raw.length());
    for (int k = 0; k < raw.length(); k++) {
      char c = raw.charAt(k);
      if (c != '\\' || k + 1 >= raw.length()) {
        out.append(c);
        continue;
      }
      char e = raw.charAt(++k);
      switch (e) {
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'u' -> {
          out.append((char) Integer.parseInt(raw.substring(k + 1, k + 5), 16));
          k += 4;
        }
        default -> out.append(e); // \" \\ \/ \'
      }
    }
    return out.toString();
  }
}
