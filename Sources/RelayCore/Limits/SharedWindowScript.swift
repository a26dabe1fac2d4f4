/// The Lua script that keeps ``LimitWindow``'s fixed window and block in Redis, atomically per
/// request, so that several relays count one key together (DESIGN.md, "Several instances").
///
/// `KEYS[1]`: the key (``LimiterKey/storeKey(prefix:kind:)``). `ARGV`: requests, period and block
/// in microseconds, and the time in microseconds, or an empty string for the server's own clock
/// (`TIME`), which every instance then shares. The key is a hash `s` (window start), `c` (count),
/// `b` (blocked until, 0: not blocked), expiring when its window or block has passed.
/// `ARGV[5]` is the caller's request tag, returned first so that a reply is matched to its request.
/// Returns `{tag, 0}` (allowed) or `{tag, microseconds until a retry may succeed}`.
public enum SharedWindowScript {
    /// Within a window (the usual case) the script only counts (`HINCRBY`); the key's expiry, set when its
    /// window or block starts, already ends with it.
    public static let source = """
        local requests = tonumber(ARGV[1])
        local period = tonumber(ARGV[2])
        local block = tonumber(ARGV[3])
        local now = tonumber(ARGV[4])
        if not now then
          local time = redis.call('TIME')
          now = tonumber(time[1]) * 1000000 + tonumber(time[2])
        end
        local state = redis.call('HMGET', KEYS[1], 's', 'c', 'b')
        local start = tonumber(state[1])
        local blocked = tonumber(state[3]) or 0
        if start and now < blocked then
          return {ARGV[5], blocked - now}
        end
        if start and blocked == 0 and now < start + period then
          local count = redis.call('HINCRBY', KEYS[1], 'c', 1)
          if count <= requests then return {ARGV[5], 0} end
          if block > 0 then
            redis.call('HSET', KEYS[1], 'b', string.format('%d', now + block))
            redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(block / 1000)))
            return {ARGV[5], block}
          end
          return {ARGV[5], start + period - now}
        end
        redis.call('HSET', KEYS[1], 's', string.format('%d', now), 'c', 1, 'b', 0)
        redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(period / 1000)))
        if requests >= 1 then return {ARGV[5], 0} end
        if block > 0 then
          redis.call('HSET', KEYS[1], 'b', string.format('%d', now + block))
          redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(block / 1000)))
          return {ARGV[5], block}
        end
        return {ARGV[5], period}
        """

    /// The script's `ARGV` for `policy` at `now` (microseconds; nil: the server's clock).
    public static func arguments(_ policy: LimitPolicy, nowMicroseconds: UInt64? = nil) -> [[UInt8]] {
        [
            Array(String(policy.requests).utf8), Array(String(policy.period / 1_000).utf8),
            Array(String(policy.block / 1_000).utf8), nowMicroseconds.map { Array(String($0).utf8) } ?? [],
        ]
    }

    /// The decision a reply stands for; nil for a value the script never returns.
    public static func decision(_ reply: Int64) -> LimitDecision? {
        guard reply >= 0 else { return nil }
        if reply == 0 { return .allowed }
        return .limited(retryAfter: LimitWindow.seconds(UInt64(reply) * 1_000))
    }
}
