/*
 * The commit of an append whose data files Spark wrote without committing (ingest/batches.py, one-pass
 * appends): the write ran with Iceberg's `rewritten-file-scan-task-set-id` option, which makes its
 * SparkWrite stage the files in the driver's FileRewriteCoordinator instead of committing them, so the
 * snapshot summary can carry what was only known once the rows were written (the record-time range and
 * counts observed during the write). One append through the table's catalog (floe's REST API: the
 * Kafka offsets fence applies), then the staged entry is cleared.
 *
 * Files of a commit that definitely failed (floe refused the offsets, say) are deleted; those of a
 * commit whose outcome is unknown are kept, as they may be the table's now.
 */
package floe.ingest;

import java.util.Map;
import java.util.Set;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.Table;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.spark.FileRewriteCoordinator;
import org.apache.iceberg.spark.Spark3Util;
import org.apache.spark.sql.SparkSession;

public final class StagedAppend {
  private StagedAppend() {}

  /** Commit the files staged under `fileSetId` for table `name` as one append with `summary`; returns
   * how many data files it added. */
  public static int commit(Object session, Object name, Object fileSetId, Object summary) {
    Table table = load(session, name);
    FileRewriteCoordinator coordinator = FileRewriteCoordinator.get();
    String id = (String) fileSetId;
    Set<DataFile> files = coordinator.fetchNewFiles(table, id);
    try {
      AppendFiles append = table.newAppend();
      for (DataFile file : files) {
        append.appendFile(file);
      }
      @SuppressWarnings("unchecked")
      Map<String, String> properties = (Map<String, String>) summary;
      for (Map.Entry<String, String> property : properties.entrySet()) {
        append.set(property.getKey(), property.getValue());
      }
      // As Spark's own appends record it: which Spark application wrote the snapshot.
      append.set("spark.app.id", ((SparkSession) session).sparkContext().applicationId());
      append.commit();
      return files.size();
    } catch (CommitStateUnknownException unknown) {
      throw unknown;
    } catch (RuntimeException failed) {
      delete(table, files);
      throw failed;
    } finally {
      coordinator.clearRewrite(table, id);
    }
  }

  /** Delete the files staged under `fileSetId` for table `name` (if any) and forget them. */
  public static int discard(Object session, Object name, Object fileSetId) {
    Table table = load(session, name);
    FileRewriteCoordinator coordinator = FileRewriteCoordinator.get();
    String id = (String) fileSetId;
    if (!coordinator.fetchSetIds(table).contains(id)) {
      return 0;
    }
    Set<DataFile> files = coordinator.fetchNewFiles(table, id);
    try {
      delete(table, files);
      return files.size();
    } finally {
      coordinator.clearRewrite(table, id);
    }
  }

  private static Table load(Object session, Object name) {
    try {
      return Spark3Util.loadIcebergTable((SparkSession) session, (String) name);
    } catch (Exception e) {
      throw new IllegalStateException("cannot load table " + name + ": " + e.getMessage(), e);
    }
  }

  private static void delete(Table table, Set<DataFile> files) {
    for (DataFile file : files) {
      try {
        table.io().deleteFile(file.location());
      } catch (RuntimeException ignored) {
        // Left for the maintenance worker's orphan removal.
      }
    }
  }
}
