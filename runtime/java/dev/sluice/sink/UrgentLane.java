package dev.sluice.sink;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * The urgent lane: the scheduler's urgent bands reach the kernel and never wait for a task slot.
 *
 * <p>Spark never pre-empts a running task, and on a few cores an urgent batch's driver work and
 * tasks share the CPUs with whatever bulk tasks hold them. Three things fix that here:
 *
 * <ul>
 *   <li><b>CPU priority.</b> A thread running a task of an urgent band (a pool named in {@link
 *       #URGENT_POOLS}), and the stream thread of a query whose last batch was granted one, runs
 *       at a raised priority (nice -5); every other task at the normal one (nice 0). The kernel
 *       then gives the CPU to the urgent threads first and the bulk tasks keep every cycle they
 *       had against everything else on the machine. Java priorities change a Linux thread's nice
 *       value only with {@code -XX:ThreadPriorityPolicy=1} (the session adds it), and raising one
 *       needs CAP_SYS_NICE or an RLIMIT_NICE of 25 (a node setting; pods never have the
 *       capability). The plugin tries once, on a thread of its own, reading the kernel's figure
 *       ({@code /proc/thread-self/stat}). Where a thread may not rise but may come back to nice 0
 *       from a lower priority (RLIMIT_NICE 20-24), bulk tasks' threads run at nice 4 instead and
 *       urgent ones at 0; where neither, every priority is left alone (said once).
 *   <li><b>Bulk tasks take turns</b> ({@link #BULK_TASKS}, 0: off). The application gets many
 *       more task slots than cores, so an urgent task always finds one free, and a task of a
 *       bulk band ({@link #BULK_POOLS}) waits at its start until fewer than that many run. (Tasks
 *       of other pools, a Real-time query's or a failed-open batch's, neither wait nor count.) The bulk
 *       bands together still run one task a core; a Spark pool has a minimum share and never a
 *       maximum, and this is the maximum. A waiting task holds its slot and no CPU. A freed turn
 *       goes to the waiting task of the most urgent bulk band (the order of {@link #BULK_POOLS}),
 *       then to the one that waited longest: in arrival order a 5 s query's 8 small tasks waited
 *       behind an aggregation's long ones and took 2-6 s a batch where they took 0.2-0.4 s
 *       ahead of them (multi-tenant, 2026-11-26). The time a batch's tasks waited for their turn
 *       is inside their run time (Spark starts the clock before the plugin's {@code onTaskStart});
 *       it is summed per batch (its jobs' description) and taken by its commit ({@link
 *       #takeTurnWait}) where the tasks run in the driver's JVM, so the work fit can tell it from
 *       the tasks' own time off the CPU.
 *   <li><b>A turn held back</b> ({@link #URGENT_RESERVE}, executor pods). Where the node gives no
 *       thread priorities, an urgent task shares its cores evenly with every bulk task running
 *       beside it. While urgent tasks run in this JVM, and for {@link #URGENT_HOLD_MS} after the
 *       last one ends, the bulk bands get that many turns fewer (never fewer than one), so a
 *       critical query's next batch finds a core no new bulk task took. A bulk task already
 *       running keeps its turn: Spark pre-empts none.
 *   <li><b>Warm before work</b> ({@link Warmup}): an executor that joins takes no urgent task
 *       until the bulk bands' tasks have warmed its JVM.
 * </ul>
 */
public final class UrgentLane implements SparkPlugin {
  public static final String URGENT_POOLS = "spark.sluice.urgentPools";
  public static final String BULK_TASKS = "spark.sluice.bulkTasks";
  public static final String BULK_POOLS = "spark.sluice.bulkPools";
  public static final String URGENT_RESERVE = "spark.sluice.urgentReserve";
  /** How long after an urgent task ends its JVM still holds the turns back: about a tight trigger's gap. */
  static final long URGENT_HOLD_MS = 1000;
  static final int RAISED_NICE = -5;
  /** Nice of a thread at Java priority 1 under ThreadPriorityPolicy=1: a bulk task's, where raising is refused. */
  static final int LOWERED_NICE = 4;

  private static volatile Set<String> urgent;
  private static volatile Map<String, Integer> bulkRanks = Collections.emptyMap();
  private static volatile Turns bulk;
  private static volatile boolean raising;
  /** Bulk tasks' threads go to {@link #LOWERED_NICE} while they run (a thread may come back, not go above 0). */
  private static volatile boolean lowering;
  /** Turns held back while urgent tasks run ({@link #URGENT_RESERVE}): only then are they counted. */
  private static volatile boolean reserving;
  private static volatile String mechanism = "none";
  private static volatile String why = "not started";
  private static volatile boolean started;
  private static final ThreadLocal<Boolean> WAITED = ThreadLocal.withInitial(() -> false);
  private static final ThreadLocal<Boolean> URGENT_TASK = ThreadLocal.withInitial(() -> false);
  /** Nanoseconds bulk tasks waited for a turn, by their job's description (one a batch). */
  private static final Map<String, Long> TURN_WAITS = new ConcurrentHashMap<>();
  /** Batches whose waits are kept at most: one whose commit never comes is dropped with the rest. */
  static final int TURN_WAITS_KEPT = 4096;

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        Warmup.driverStarted(sc, names(sc.conf().get(URGENT_POOLS, "")));
        return Collections.emptyMap();
      }

      @Override
      public Object receive(Object message) {
        return Warmup.receive(message);
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        start(ctx.conf());
        if (urgent != null) { // warm before work: cold until the bulk bands' tasks have warmed it
          Warmup.executorStarted(ctx);
        }
      }

      @Override
      public void onTaskStart() {
        TaskContext task = TaskContext.get();
        taskStarts(task == null ? null : task.getLocalProperty(GatedStreamingWrite.POOL),
            task == null ? null : task.getLocalProperty(GatedStreamingWrite.DESCRIPTION));
      }

      @Override
      public void onTaskSucceeded() {
        taskEnds();
      }

      @Override
      public void onTaskFailed(org.apache.spark.TaskFailedReason reason) {
        taskEnds();
      }
    };
  }

  /** Reads the lane's settings from `conf` and checks the kernel honours priorities both ways. */
  static synchronized void start(SparkConf conf) {
    if (started) {
      return;
    }
    started = true;
    Set<String> pools = names(conf.get(URGENT_POOLS, ""));
    if (pools.isEmpty()) {
      why = URGENT_POOLS + " is empty";
      return;
    }
    urgent = Collections.unmodifiableSet(pools);
    int cap = conf.getInt(BULK_TASKS, 0);
    bulkRanks = ranks(conf.get(BULK_POOLS, ""));
    if (cap > 0) {
      bulk = new Turns(cap);
    }
    String refused = trial(Thread.MAX_PRIORITY, RAISED_NICE);
    raising = refused == null;
    String lowered = raising ? null : trial(Thread.MIN_PRIORITY, LOWERED_NICE);
    lowering = !raising && lowered == null;
    mechanism = raising ? "threadNice" : lowering ? "bulkNice" : "none";
    int held = conf.getInt(URGENT_RESERVE, 0);
    if (bulk != null && !raising && !lowering && held > 0) {
      bulk.holdBack(held, URGENT_HOLD_MS);
      reserving = true;
    }
    why = raising ? "on" : lowering ? "bulk tasks lowered: " + refused : refused + "; " + lowered;
    if (!raising) {
      System.err.println("sluice: urgent tasks run at the normal CPU priority: " + why);
    }
  }

  private static Set<String> names(String listed) {
    Set<String> found = new HashSet<>(Arrays.asList(listed.trim().split(",")));
    found.remove("");
    return Collections.unmodifiableSet(found);
  }

  private static Map<String, Integer> ranks(String listed) {
    Map<String, Integer> found = new HashMap<>();
    for (String name : listed.trim().split(",")) {
      if (!name.isEmpty()) {
        found.putIfAbsent(name, found.size());
      }
    }
    return Collections.unmodifiableMap(found);
  }

  private static void taskStarts(String pool, String description) {
    Set<String> pools = urgent;
    if (pools == null) {
      return;
    }
    boolean isUrgent = pool != null && pools.contains(pool);
    Turns turns = bulk;
    Integer rank = pool == null ? null : bulkRanks.get(pool);
    if (turns != null && isUrgent && reserving) {
      turns.urgentStarted();
      URGENT_TASK.set(true);
    }
    if (turns != null && rank != null) {
      try {
        long asked = System.nanoTime();
        turns.acquire(rank);
        WAITED.set(true);
        long waited = System.nanoTime() - asked;
        if (description != null) {
          if (TURN_WAITS.size() >= TURN_WAITS_KEPT) {
            TURN_WAITS.clear();
          }
          TURN_WAITS.merge(description, waited, Long::sum);
        }
      } catch (InterruptedException killed) { // the task was killed while it waited: let it end
        Thread.currentThread().interrupt();
      }
    }
    prioritize(isUrgent, rank != null);
  }

  private static void taskEnds() {
    Warmup.taskEnded();
    if (WAITED.get()) {
      WAITED.set(false);
      bulk.release();
    }
    if (URGENT_TASK.get()) {
      URGENT_TASK.set(false);
      bulk.urgentEnded();
    }
    prioritize(false);
  }

  private static void prioritize(boolean isUrgent) {
    prioritize(isUrgent, false);
  }

  /** An urgent thread raised where the node allows it, else a bulk one lowered where it may come back. */
  private static void prioritize(boolean isUrgent, boolean isBulk) {
    int wanted;
    if (raising) {
      wanted = isUrgent ? Thread.MAX_PRIORITY : Thread.NORM_PRIORITY;
    } else if (lowering) {
      wanted = isBulk ? Thread.MIN_PRIORITY : Thread.NORM_PRIORITY;
    } else {
      return;
    }
    Thread self = Thread.currentThread();
    if (self.getPriority() != wanted) {
      self.setPriority(wanted);
    }
  }

  /**
   * Null if a fresh thread at Java priority {@code priority} runs at {@code nice} and comes back to
   * nice 0 at the normal priority; else why not. Tried, never read from capability bits: the
   * kernel allows it with CAP_SYS_NICE or where RLIMIT_NICE (a node setting) reaches that far.
   */
  static String trial(int priority, int nice) {
    String[] result = new String[1];
    Thread probe = new Thread(() -> {
      Thread self = Thread.currentThread();
      self.setPriority(priority);
      int there = niceHere();
      self.setPriority(Thread.NORM_PRIORITY);
      int back = niceHere();
      if (there != nice) {
        result[0] = "a thread at Java priority " + priority + " runs at nice " + there + ", not " + nice
            + " (it needs -XX:ThreadPriorityPolicy=1, and CAP_SYS_NICE or RLIMIT_NICE " + (20 - Math.min(nice, 0))
            + ")";
      } else if (back != 0) {
        result[0] = "a thread back at Java priority 5 runs at nice " + back + ", not 0 (it needs RLIMIT_NICE 20)";
      }
    }, "sluice-priority-check");
    probe.start();
    try {
      probe.join();
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
    return result[0];
  }

  /** The lever this JVM found: threadNice, bulkNice or none (as the pool's `status.priority` names it). */
  public static String mechanism() {
    return mechanism;
  }

  /** Tries the levers in this JVM and prints the one it has (the node tier's test starts it so). */
  public static void main(String[] args) {
    start(new SparkConf(false).set(URGENT_POOLS, "band0"));
    System.out.println(mechanism + ": " + why);
  }

  /** The driver's stream thread after its batch's grant: it plans its next batch at that band's priority. */
  static void onStreamThread(String pool) {
    if (!started) {
      SparkEnv env = SparkEnv.get();
      if (env == null) {
        return;
      }
      start(env.conf());
    }
    Set<String> pools = urgent;
    if (pools != null) {
      prioritize(pool != null && pools.contains(pool));
    }
  }

  /** "on", or why urgent tasks run at the normal priority (for the runtime's log and the tests). */
  public static String status() {
    return why;
  }

  /**
   * Nanoseconds the tasks of the jobs described {@code description} (a batch's) waited for their
   * turn, forgotten once taken; -1 where no turns are taken in this JVM (no cap, or the tasks run
   * in executors of their own, whose waits the driver does not see).
   */
  public static long takeTurnWait(String description) {
    Long waited = TURN_WAITS.remove(description);
    if (bulk == null) {
      return -1;
    }
    return waited == null ? 0 : waited;
  }

  /** Bulk tasks running with a turn now, or -1 without a cap. */
  public static int bulkRunning() {
    Turns turns = bulk;
    return turns == null ? -1 : turns.running();
  }

  /** Urgent tasks running now, counted while turns are held back; -1 without a cap. */
  public static int urgentRunning() {
    Turns turns = bulk;
    return turns == null ? -1 : turns.urgentRunning();
  }

  /** Bulk tasks waiting for their turn now, or -1 without a cap. */
  public static int bulkWaiting() {
    Turns turns = bulk;
    return turns == null ? -1 : turns.waiting();
  }

  /**
   * At most {@code permits} holders at once, {@code held} fewer while urgent work is on ({@link
   * #holdBack}); a freed turn goes to the waiter of the lowest rank, then to the one that came
   * first. (A {@link java.util.concurrent.Semaphore} serves arrival order alone.) A task thread
   * killed while it waits leaves the queue.
   */
  static final class Turns {
    private final int permits;
    private int held;
    private long holdNanos;
    private int urgentRunning;
    private long urgentUntil;
    private int running;
    private long arrivals;
    private final PriorityQueue<long[]> waiters =
        new PriorityQueue<>(Comparator.<long[]>comparingLong(w -> w[0]).thenComparingLong(w -> w[1]));

    Turns(int permits) {
      this.permits = permits;
    }

    /** While urgent tasks run, and for {@code holdMs} after the last ends, {@code turns} fewer (at least one). */
    synchronized void holdBack(int turns, long holdMs) {
      held = turns;
      holdNanos = holdMs * 1_000_000L;
    }

    synchronized void urgentStarted() {
      urgentRunning++;
    }

    synchronized void urgentEnded() {
      urgentRunning = Math.max(urgentRunning - 1, 0);
      urgentUntil = System.nanoTime() + holdNanos;
      notifyAll(); // waiters now wait for the hold's end
    }

    /** Turns open now, and the nanoseconds until that count may rise on its own (0: not before a call). */
    private long[] open(long now) {
      if (held == 0 || (urgentRunning == 0 && now - urgentUntil >= 0)) {
        return new long[] {permits, 0};
      }
      return new long[] {Math.max(permits - held, 1), urgentRunning > 0 ? 0 : urgentUntil - now};
    }

    synchronized void acquire(int rank) throws InterruptedException {
      if (running < open(System.nanoTime())[0] && waiters.isEmpty()) {
        running++;
        return;
      }
      long[] self = {rank, arrivals++};
      waiters.add(self);
      try {
        while (true) {
          long[] now = open(System.nanoTime());
          if (running < now[0] && waiters.peek() == self) {
            break;
          }
          if (now[1] > 0) { // the hold ends on its own: look again then
            wait(now[1] / 1_000_000L + 1);
          } else {
            wait();
          }
        }
      } catch (InterruptedException killed) {
        waiters.remove(self);
        notifyAll();
        throw killed;
      }
      waiters.poll();
      running++;
      if (running < open(System.nanoTime())[0] && !waiters.isEmpty()) {
        notifyAll();
      }
    }

    /** Bulk tasks holding a turn now. */
    synchronized int running() {
      return running;
    }

    synchronized int urgentRunning() {
      return urgentRunning;
    }

    synchronized void release() {
      running--;
      notifyAll();
    }

    synchronized int waiting() {
      return waiters.size();
    }
  }

  /** The calling thread's nice value as the kernel has it (-100 if unreadable). */
  public static int niceHere() {
    try {
      String stat = new String(Files.readAllBytes(Path.of("/proc/thread-self/stat")), StandardCharsets.US_ASCII);
      // fields after the command (which may hold spaces) start after the last ')': state is field 3, nice 19
      String[] fields = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
      return Integer.parseInt(fields[16]);
    } catch (Exception unreadable) {
      return -100;
    }
  }

  /** `niceHere` for SQL's `reflect` (its argument keeps the call per row, not folded). */
  public static String niceOfTask(long ignored) {
    return Integer.toString(niceHere());
  }
}
