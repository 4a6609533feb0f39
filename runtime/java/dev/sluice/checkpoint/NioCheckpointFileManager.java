package dev.sluice.checkpoint;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's FileSystem-based checkpoint writer with one change: on Hadoop's raw local filesystem a
 * new file is created by Java itself, not by Hadoop. Without Hadoop's native library (pip's pyspark
 * has none) Hadoop sets every new local file's permissions by starting a {@code chmod} process:
 * about four a micro-batch (the offset log, the commit log, their temporary files), more for a
 * stateful batch (each state store's delta file). Here the file is created with the process's
 * umask (Hadoop's default permission is the same 0644 under the usual 022), written, and renamed
 * into place by the parent class as before: each write stays atomic on a local filesystem.
 *
 * <p>Any other filesystem (Hadoop's checksummed {@code LocalFileSystem}, which the RocksDB state
 * store needs; HDFS; an object store) goes through the parent class unchanged.
 */
public class NioCheckpointFileManager extends FileSystemBasedCheckpointFileManager {
  public NioCheckpointFileManager(Path path, Configuration conf) {
    super(path, conf);
  }

  @Override
  public FSDataOutputStream createTempFile(Path path) {
    if (!(fs() instanceof RawLocalFileSystem raw)) {
      return super.createTempFile(path);
    }
    File file = raw.pathToFile(path);
    try {
      File parent = file.getParentFile();
      if (parent != null && !parent.isDirectory() && !parent.mkdirs() && !parent.isDirectory()) {
        throw new IOException("Mkdirs failed to create " + parent);
      }
      // overwrite, as the parent's fs.create(path, true): the name is a fresh temporary one
      return new FSDataOutputStream(new FileOutputStream(file, false), null);
    } catch (IOException e) {
      throw unchecked(e); // as Hadoop's: Scala's signature declares no exceptions, Spark catches IOException
    }
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException unchecked(Throwable e) throws E {
    throw (E) e;
  }
}
