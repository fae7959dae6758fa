/*
 * A decoder of Kafka values as a Catalyst expression (ingest/decode.py calls it by its registered
 * name, like a UDF).
 *
 * A Java UDF returns external values (a Row of Strings, Instants, Lists) that Spark converts to its
 * internal ones for every row, one type converter per field. A decoder behind this expression builds
 * the internal row itself (UTF8String, microseconds, GenericArrayData), so nothing is converted after
 * it. The generated code calls the decoder through `java.util.function.Function`: it never names a
 * class of floe's jar, which the driver's code generator cannot load (the jar has a class loader of
 * its own there).
 */
package floe.ingest;

import java.io.Serializable;
import java.util.List;
import java.util.function.Function;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.Block;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import scala.Function1;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * decoder(value bytes) → the decoder's row, NULL for a NULL value. (An Expression, not a
 * UnaryExpression: javac does not see the latter's final withNewChildrenInternal as implementing
 * TreeNode's generic one.)
 */
public final class DecodeValue extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;

  /** A value decoder: bytes (never NULL) → a row of Spark's internal values of the result type. */
  public interface Decoder extends Function<byte[], InternalRow>, Serializable {}

  private final String name;
  private final Expression child;
  private final Decoder decoder;
  private final DataType type;
  private final Seq<Expression> children;

  DecodeValue(String name, Expression child, Decoder decoder, DataType type) {
    this.name = name;
    this.child = child;
    this.decoder = decoder;
    this.type = type;
    this.children = sequence(List.of(child));
  }

  private static <T> Seq<T> sequence(List<T> items) {
    return CollectionConverters.asScala(items).toList();
  }

  /**
   * Registers in `spark`'s function registry as `name` the function of one binary argument that
   * decodes it with `decoder` into `type`.
   */
  static void register(SparkSession spark, String name, Decoder decoder, DataType type) {
    Function1<Seq<Expression>, Expression> builder =
        arguments -> {
          if (arguments.size() != 1) {
            throw new IllegalArgumentException(name + " takes one argument, the value's bytes");
          }
          return new DecodeValue(name, arguments.head(), decoder, type);
        };
    ((org.apache.spark.sql.classic.SparkSession) spark)
        .sessionState()
        .functionRegistry()
        .createOrReplaceTempFunction(name, builder, "java_udf");
  }

  /** The registered name: plans show `name(value)`, as they showed the UDF. */
  @Override
  public String prettyName() {
    return name;
  }

  @Override
  public Seq<Expression> children() {
    return children;
  }

  @Override
  public boolean nullable() {
    return child.nullable();
  }

  @Override
  public DataType dataType() {
    return type;
  }

  /**
   * Not deterministic to the optimizer, like the UDF it replaces: one call per row, never copied into
   * each of the fields read from its result.
   */
  @Override
  public boolean deterministic() {
    return false;
  }

  @Override
  public Object eval(InternalRow input) {
    Object value = child.eval(input);
    if (value == null) {
      return null;
    }
    if (!(value instanceof byte[] bytes)) {
      throw new IllegalArgumentException("decoders read binary values, not " + child.dataType());
    }
    return decoder.apply(bytes);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    if (!(child.dataType() instanceof BinaryType)) {
      throw new IllegalArgumentException("decoders read binary values, not " + child.dataType());
    }
    ExprCode value = child.genCode(ctx);
    String call = ctx.addReferenceObj("decoder", decoder, Function.class.getName());
    String decode =
        "boolean " + ev.isNull() + " = " + value.isNull() + ";\n"
            + "InternalRow " + ev.value() + " = null;\n"
            + "if (!" + ev.isNull() + ") {\n"
            + "  " + ev.value() + " = (InternalRow) " + call + ".apply(" + value.value() + ");\n"
            + "}\n";
    Block own = new CodeBlock(sequence(List.of(decode)), sequence(List.<JavaCode>of()));
    return ev.copy(Block.blocksToBlock(sequence(List.of(value.code(), own))), ev.isNull(), ev.value());
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> newChildren) {
    if (newChildren.size() != 1) {
      throw new IllegalArgumentException("DecodeValue has one child");
    }
    return new DecodeValue(name, newChildren.head(), decoder, type);
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    if (n != 0) {
      throw new IndexOutOfBoundsException(n);
    }
    return child;
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof DecodeValue;
  }
}
