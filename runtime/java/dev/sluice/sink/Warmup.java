package dev.sluice.sink;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.StringJoiner;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.scheduler.ExecutorLossReason;
import org.apache.spark.scheduler.Pool;
import org.apache.spark.scheduler.Schedulable;
import org.apache.spark.scheduler.SchedulingMode;
import org.apache.spark.scheduler.TaskSetExcludelist;
import org.apache.spark.scheduler.TaskSetManager;
import scala.Option;

/**
 * Warm before work: an executor that joins a running pool runs no task of an urgent band until its
 * JVM is warm; the bulk bands' tasks, which keep running on it, are what warms it.
 *
 * <p>A new executor's JVM interprets the task path and compiles it while it runs (its JIT took
 * 0.6-0.96 of a 2-core node for the first 45-50 s, measured), and Spark's Kafka source makes
 * about half of every query's partitions prefer it the batch after it joins. The urgent
 * filters' worst batches came right after a join, from tasks on the cold JVM.
 *
 * <p><b>Executor side</b> ({@link #executorStarted}, from the lane plugin's {@code init}, which
 * Spark runs before the executor takes any task): the executor tells the driver it is cold, and a
 * thread of its own says it is warm once it has run {@link #MIN_TASKS} tasks and its JIT
 * compilers spent under {@link #QUIET_SHARE} of a core over the last {@link #QUIET_SECONDS}
 * seconds, or at {@link #MAX_SECONDS} whatever happens (the bound; unset or 0: off).
 *
 * <p><b>Driver side</b>: the urgent bands' FAIR pools become {@link WarmPool}s, which exclude
 * every cold executor from each task set added to them, as Spark's own task-set exclude list
 * does for an executor that failed (the offer is refused, the task runs on another executor's
 * free slot: the pool's slots outnumber its cores). Spark's internals used here, in this one
 * class: the task scheduler's root pool, {@code Pool}'s constructor and its {@code
 * addSchedulable} and {@code executorLost} (overridden), a task set's exclude list ({@code
 * spark.excludeOnFailure.taskAndStage.enabled}, with failure thresholds the session raises so
 * failures exclude nothing) and that list's private set of excluded executors, read and written
 * under the task scheduler's lock. {@link #check} names whichever a Spark upgrade moved.
 *
 * <p>Exclusion needs a warm executor to run the urgent tasks: while none is (the pool's first
 * executors), cold ones take every task, and when the last warm one is lost its cold ones are
 * let back in before Spark could find a task set with nowhere to run.
 */
public final class Warmup {
  public static final String MAX_SECONDS = "spark.sluice.warmup.maxSeconds";
  public static final String MIN_TASKS = "spark.sluice.warmup.minTasks";
  /**
   * The bound: an executor is warm this long after it started, whatever its compilers do; 0 (the
   * default here): off, every executor takes urgent tasks at once. A pool sets it from
   * {@code spec.executor.warmup} (60 s unless the pool says otherwise). While an executor is cold
   * the urgent tasks run on the others; the runtime keeps Spark's locality wait at the pool's own
   * meanwhile (no state may move onto a cold executor), else the urgent tasks preferring it waited
   * the raised wait in every batch (measured on pods, docs/performance.md).
   */
  static final double DEFAULT_MAX_SECONDS = 0.0;
  /** Tasks (of any band) an executor runs before it may be called warm. */
  static final int DEFAULT_MIN_TASKS = 16;
  /** The window over which the compilers must be quiet. */
  static final double QUIET_SECONDS = 5.0;
  /**
   * Quiet: the JIT compilers used under this share of one core over the window (their elapsed
   * compile time, which CPU contention stretches: on a busy 2-core node they did not fall under
   * 10% within 60 s).
   */
  static final double QUIET_SHARE = 0.25;
  static final String EXCLUDED_FIELD = "excludedExecs";

  private Warmup() {}

  // ---------------------------------------------------------------- executor side

  private static final AtomicInteger TASKS = new AtomicInteger();

  /** A task ended in this executor (the lane plugin's onTaskSucceeded and onTaskFailed). */
  static void taskEnded() {
    TASKS.incrementAndGet();
  }

  /** Why an executor is warm now, or null: the rule, pure (the watcher's thread feeds it). */
  public static String warmWhy(double elapsed, int tasks, double compileShare, double maxSeconds, int minTasks) {
    if (tasks >= minTasks && compileShare >= 0 && compileShare < QUIET_SHARE && elapsed >= QUIET_SECONDS) {
      return String.format("compilers quiet (%.0f%% of a core over %.0f s) after %d tasks",
          compileShare * 100, QUIET_SECONDS, tasks);
    }
    if (elapsed >= maxSeconds) {
      String compilers = compileShare < 0 ? "compilers not measured over a whole window"
          : String.format("compilers at %.0f%% of a core", compileShare * 100);
      return String.format("the %.0f s bound (%d tasks, %s)", maxSeconds, tasks, compilers);
    }
    return null;
  }

  /** Tells the driver this executor is cold (before its first task) and starts its watcher. */
  static void executorStarted(PluginContext ctx) {
    String id = ctx.executorID();
    if ("driver".equals(id)) { // a local master: one JVM, nothing joins it
      return;
    }
    SparkConf conf = ctx.conf();
    double maxSeconds = conf.getDouble(MAX_SECONDS, DEFAULT_MAX_SECONDS);
    int minTasks = conf.getInt(MIN_TASKS, DEFAULT_MIN_TASKS);
    if (maxSeconds <= 0) { // off: this executor takes urgent tasks from its first
      return;
    }
    try {
      ctx.ask("cold " + id); // (not ctx.hostname(): an executor's RPC env has no address, it throws)
    } catch (Exception unreachable) {
      System.err.println("sluice: executor " + id + " could not tell the driver it is warming up: " + unreachable);
      return;
    }
    Thread watcher = new Thread(() -> watch(ctx, id, maxSeconds, minTasks), "sluice-warmup");
    watcher.setDaemon(true);
    watcher.start();
  }

  private static void watch(PluginContext ctx, String id, double maxSeconds, int minTasks) {
    CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
    boolean timed = jit != null && jit.isCompilationTimeMonitoringSupported();
    long start = System.nanoTime();
    ArrayDeque<long[]> samples = new ArrayDeque<>(); // {nanos, compile millis}
    while (true) {
      try {
        Thread.sleep(1000);
      } catch (InterruptedException stopped) {
        return;
      }
      long now = System.nanoTime();
      samples.addLast(new long[] {now, timed ? jit.getTotalCompilationTime() : 0});
      while (samples.size() > 1 && now - samples.peekFirst()[0] > QUIET_SECONDS * 1e9 + 5e8) {
        samples.removeFirst();
      }
      long[] first = samples.peekFirst();
      double span = (now - first[0]) / 1e9;
      double share = !timed || span < QUIET_SECONDS - 0.5 ? -1
          : (samples.peekLast()[1] - first[1]) / 1000.0 / span;
      double elapsed = (now - start) / 1e9;
      String why = warmWhy(elapsed, TASKS.get(), share, maxSeconds, minTasks);
      if (why != null) {
        try {
          ctx.send(String.format("warm %s %.1f %s", id, elapsed, why));
        } catch (Exception unreachable) {
          System.err.println("sluice: executor " + id + " could not tell the driver it is warm: " + unreachable);
        }
        return;
      }
    }
  }

  // ---------------------------------------------------------------- driver side

  private static volatile SparkContext context;
  private static volatile Set<String> urgent = Collections.emptySet();
  /** Cold executors, warm ones, and what happened, in order (guarded by the scheduler's lock). */
  private static final Set<String> COLD = new LinkedHashSet<>();
  private static final Set<String> WARM = new LinkedHashSet<>();
  private static final List<String> EVENTS = new ArrayList<>();
  private static final List<WarmPool> POOLS = new ArrayList<>();
  static final int EVENTS_KEPT = 1000;
  private static volatile String trouble = "";

  /** The driver plugin's init: the application and its urgent bands' pools. */
  static void driverStarted(SparkContext sc, Set<String> urgentPools) {
    context = sc;
    urgent = urgentPools;
  }

  /** An executor's message: "cold ID" or "warm ID SECONDS WHY". */
  static Object receive(Object message) {
    String[] parts = String.valueOf(message).split(" ", 4);
    if (parts.length >= 2 && parts[0].equals("cold")) {
      cold(parts[1]);
    } else if (parts.length >= 2 && parts[0].equals("warm")) {
      warm(parts[1], parts.length == 4 ? parts[2] + " s: " + parts[3] : "");
    }
    return "ok";
  }

  private static Object lock() {
    SparkContext sc = context;
    return sc == null ? Warmup.class : sc.taskScheduler();
  }

  /** Executor `id` is cold: no urgent task set takes it while a warm one runs. */
  public static void cold(String id) {
    synchronized (lock()) {
      install();
      WARM.remove(id);
      COLD.add(id);
      note(id, "cold", "started");
      if (!WARM.isEmpty()) {
        forEachTaskSet(manager -> exclude(manager, id, true));
      }
    }
  }

  /** Executor `id` is warm: urgent task sets take it, the ones already queued too. */
  public static void warm(String id, String why) {
    synchronized (lock()) {
      boolean first = WARM.isEmpty();
      COLD.remove(id);
      WARM.add(id);
      note(id, "warm", why);
      forEachTaskSet(manager -> exclude(manager, id, false));
      if (first) { // the first warm one: cold ones are now kept off new urgent task sets
        for (String other : COLD) {
          forEachTaskSet(manager -> exclude(manager, other, true));
        }
      }
    }
  }

  /** Executor `id` is gone (called under the scheduler's lock, before Spark offers anything). */
  static void gone(String id) {
    boolean wasWarm = WARM.remove(id);
    boolean wasCold = COLD.remove(id);
    if (wasWarm || wasCold) {
      note(id, "gone", "");
    }
    if (wasWarm && WARM.isEmpty()) { // nowhere else to run: the cold ones take urgent tasks again
      for (String other : COLD) {
        forEachTaskSet(manager -> exclude(manager, other, false));
      }
    }
  }

  /** A task set joined an urgent pool (under the scheduler's lock): cold executors excluded. */
  static void added(TaskSetManager manager) {
    if (!WARM.isEmpty()) {
      for (String id : COLD) {
        exclude(manager, id, true);
      }
    }
  }

  private static void note(String id, String state, String why) {
    if (EVENTS.size() >= EVENTS_KEPT) {
      EVENTS.subList(0, EVENTS_KEPT / 2).clear();
    }
    EVENTS.add(System.currentTimeMillis() + " " + id + " " + state + (why.isEmpty() ? "" : " " + why));
  }

  private interface TaskSetAction {
    void apply(TaskSetManager manager);
  }

  private static void forEachTaskSet(TaskSetAction action) {
    for (WarmPool pool : POOLS) {
      for (Schedulable child : pool.schedulableQueue()) {
        if (child instanceof TaskSetManager) {
          action.apply((TaskSetManager) child);
        }
      }
    }
  }

  private static Field excludedField() throws NoSuchFieldException {
    Field field = TaskSetExcludelist.class.getDeclaredField(EXCLUDED_FIELD);
    field.setAccessible(true);
    return field;
  }

  @SuppressWarnings("unchecked")
  private static void exclude(TaskSetManager manager, String id, boolean out) {
    Option<TaskSetExcludelist> list = manager.taskSetExcludelistHelperOpt();
    if (list.isEmpty()) {
      trouble = "task sets have no exclude list: spark.excludeOnFailure.taskAndStage.enabled is off";
      return;
    }
    try {
      scala.collection.mutable.HashSet<String> excluded =
          (scala.collection.mutable.HashSet<String>) excludedField().get(list.get());
      if (out) {
        excluded.add(id);
      } else {
        excluded.remove(id);
      }
    } catch (ReflectiveOperationException | RuntimeException moved) {
      trouble = "Spark's task-set exclude list changed: " + moved;
    }
  }

  /** The urgent bands' pools become WarmPools, once (their queued task sets move along). */
  private static void install() {
    SparkContext sc = context;
    if (sc == null || !POOLS.isEmpty()) {
      return;
    }
    Pool root = sc.taskScheduler().rootPool();
    for (String name : urgent) {
      Schedulable old = root.getSchedulableByName(name);
      WarmPool pool = old == null ? new WarmPool(name, SchedulingMode.FIFO(), 0, 1)
          : new WarmPool(name, old.schedulingMode(), old.minShare(), old.weight());
      if (old != null) {
        List<Schedulable> children = new ArrayList<>(old.schedulableQueue());
        for (Schedulable child : children) {
          old.removeSchedulable(child);
          pool.addSchedulable(child);
        }
        pool.increaseRunningTasks(old.runningTasks()); // no parent yet: the root's count stays
        root.removeSchedulable(old);
      }
      root.addSchedulable(pool);
      POOLS.add(pool);
    }
  }

  /** A FAIR pool of an urgent band: each task set added to it leaves out the cold executors. */
  static final class WarmPool extends Pool {
    WarmPool(String name, scala.Enumeration.Value mode, int minShare, int weight) {
      super(name, mode, minShare, weight);
    }

    @Override
    public void addSchedulable(Schedulable schedulable) {
      super.addSchedulable(schedulable);
      if (schedulable instanceof TaskSetManager) {
        added((TaskSetManager) schedulable);
      }
    }

    @Override
    public void executorLost(String executorId, String host, ExecutorLossReason reason) {
      gone(executorId);
      super.executorLost(executorId, host, reason);
    }
  }

  // ---------------------------------------------------------------- reading it

  /** Each executor's state, "ID=cold|warm" comma-separated (the runtime's view and the tests). */
  public static String state() {
    synchronized (lock()) {
      StringJoiner out = new StringJoiner(",");
      COLD.forEach(id -> out.add(id + "=cold"));
      WARM.forEach(id -> out.add(id + "=warm"));
      return out.toString();
    }
  }

  /** What happened, one line an event: "MILLIS ID cold|warm|gone [WHY]". */
  public static String events() {
    synchronized (lock()) {
      return String.join("\n", EVENTS);
    }
  }

  /** Empty while exclusion works; else why it does not (Spark moved an internal, or a setting). */
  public static String trouble() {
    return trouble;
  }

  /**
   * Empty if every Spark internal this class uses is where it expects; else what moved. The
   * tests call it so a Spark upgrade fails there loudly, by name.
   */
  public static String check() {
    List<String> moved = new ArrayList<>();
    try {
      excludedField();
    } catch (NoSuchFieldException gone) {
      moved.add("TaskSetExcludelist." + EXCLUDED_FIELD);
    }
    try {
      TaskSetManager.class.getMethod("taskSetExcludelistHelperOpt");
    } catch (NoSuchMethodException gone) {
      moved.add("TaskSetManager.taskSetExcludelistHelperOpt()");
    }
    try {
      Pool.class.getMethod("executorLost", String.class, String.class, ExecutorLossReason.class);
      Pool.class.getMethod("addSchedulable", Schedulable.class);
    } catch (NoSuchMethodException gone) {
      moved.add("Pool.executorLost or Pool.addSchedulable");
    }
    return String.join(", ", moved);
  }

  /** The executor running the calling task (SQL's `reflect`; its argument keeps it per row). */
  public static String executorOf(long ignored) {
    SparkEnv env = SparkEnv.get();
    return env == null ? "" : env.executorId();
  }
}
