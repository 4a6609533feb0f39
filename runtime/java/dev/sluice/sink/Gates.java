package dev.sluice.sink;

import java.util.concurrent.ConcurrentHashMap;

/** The gate of each hosted query, by the query's key (its sink's `sluice.query` option). */
public final class Gates {
  private static final ConcurrentHashMap<String, Gate> GATES = new ConcurrentHashMap<>();

  private Gates() {}

  public static void register(String key, Gate gate) {
    GATES.put(key, gate);
  }

  public static void unregister(String key) {
    GATES.remove(key);
  }

  static Gate get(String key) {
    return GATES.get(key);
  }
}
