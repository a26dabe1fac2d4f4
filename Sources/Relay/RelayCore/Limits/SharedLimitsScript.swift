/// The Lua script that keeps ``LimitWindow``'s fixed windows and blocks in Redis and decides each request of a call
/// in turn (docs/DESIGN.md, "Several instances"): its client address, and then, only if the address is admitted, its
/// phone. Several relays count one key together, atomically per call. A call carries the requests a worker's
/// pipeline writes together (``RedisClient/RedisPipeline``): one script run, with one `TIME`, for all of them.
///
/// `KEYS`: each request's address key, followed by its phone's when it has one
/// (``LimiterKey/storeKey(prefix:kind:)``). `ARGV`: the address's policy (requests, period and block in
/// microseconds), the phone's, the time in microseconds or an empty string for the server's own clock (`TIME`, which
/// every instance then shares), each request's number of keys (one digit each, `1` or `2`), and the call's tag,
/// returned first so that a reply is matched to its call. Each key is a hash `s` (window start), `c` (count), `b`
/// (blocked until, 0: not blocked), expiring when its window or block has passed.
///
/// Returns `{tag, answer, ...}`, one answer per request in order: `{address}` (no phone key, or the address refused:
/// the phone is not counted) or `{address, phone}`, each 0 (allowed) or the microseconds until a retry may succeed.
///
/// A carry-over call (``carryOverArguments(address:phone:admissions:)``) has one more argument before the key
/// counts: what an instance admitted alone while Redis could not decide (docs/DESIGN.md, "Failover"), one entry per
/// key of a request, `kind:count:age` (kind `a` or `p`, the age of the instance's window in microseconds). Each
/// count is added to its key's window when one is open (nothing while the key is blocked); otherwise the instance's
/// window becomes the key's, opened `age` before now and expiring with it. Each request is answered `{keys}`, how
/// many of its keys were counted.
public enum SharedLimitsScript {
    /// Within a window (the usual case) a decision only counts (`HINCRBY`); the key's expiry, set when its
    /// window or block starts, already ends with it.
    public static let source = """
        local function decide(key, requests, period, block, now)
          local state = redis.call('HMGET', key, 's', 'c', 'b')
          local start = tonumber(state[1])
          local blocked = tonumber(state[3]) or 0
          if start and now < blocked then
            return blocked - now
          end
          if start and blocked == 0 and now < start + period then
            local count = redis.call('HINCRBY', key, 'c', 1)
            if count <= requests then return 0 end
            if block > 0 then
              redis.call('HSET', key, 'b', string.format('%d', now + block))
              redis.call('PEXPIRE', key, math.max(1, math.ceil(block / 1000)))
              return block
            end
            return start + period - now
          end
          redis.call('HSET', key, 's', string.format('%d', now), 'c', 1, 'b', 0)
          redis.call('PEXPIRE', key, math.max(1, math.ceil(period / 1000)))
          if requests >= 1 then return 0 end
          if block > 0 then
            redis.call('HSET', key, 'b', string.format('%d', now + block))
            redis.call('PEXPIRE', key, math.max(1, math.ceil(block / 1000)))
            return block
          end
          return period
        end
        local function carry(key, period, count, age, now)
          if age >= period then return 0 end
          local state = redis.call('HMGET', key, 's', 'c', 'b')
          local start = tonumber(state[1])
          local blocked = tonumber(state[3]) or 0
          if start and now < blocked then return 0 end
          if start and blocked == 0 and now < start + period then
            redis.call('HINCRBY', key, 'c', count)
            return 1
          end
          local opened = now - age
          redis.call('HSET', key, 's', string.format('%d', opened), 'c', count, 'b', 0)
          redis.call('PEXPIRE', key, math.max(1, math.ceil((opened + period - now) / 1000)))
          return 1
        end
        local now = tonumber(ARGV[7])
        if not now then
          local time = redis.call('TIME')
          now = tonumber(time[1]) * 1000000 + tonumber(time[2])
        end
        local ar, ap, ab = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
        local pr, pp, pb = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
        local counts = ARGV[#ARGV - 1]
        local carrying = #ARGV == 10
        local total = 0
        for index = 1, #counts do
          local keys = string.byte(counts, index) - 48
          if not carrying and keys ~= 1 and keys ~= 2 then
            return redis.error_reply('ERR a request has one key or two')
          end
          total = total + keys
        end
        if total ~= #KEYS or total == 0 then return redis.error_reply('ERR the key counts do not add up') end
        local answers = {ARGV[#ARGV]}
        local key = 1
        if carrying then
          local entries = {}
          for kind, count, age in string.gmatch(ARGV[8], '([ap]):(%d+):(%d+)') do
            entries[#entries + 1] = {kind, tonumber(count), tonumber(age)}
          end
          for index = 1, #counts do
            local keys = string.byte(counts, index) - 48
            if keys > #entries then return redis.error_reply('ERR a carried key without its count') end
            local carried = 0
            for position = 1, keys do
              local entry = entries[position]
              local period = ap
              if entry[1] == 'p' then period = pp end
              carried = carried + carry(KEYS[key + position - 1], period, entry[2], entry[3], now)
            end
            answers[index + 1] = {carried}
            key = key + keys
          end
          return answers
        end
        for index = 1, #counts do
          local keys = string.byte(counts, index) - 48
          local address = decide(KEYS[key], ar, ap, ab, now)
          if address ~= 0 or keys == 1 then
            answers[index + 1] = {address}
          else
            answers[index + 1] = {address, decide(KEYS[key + 1], pr, pp, pb, now)}
          end
          key = key + keys
        end
        return answers
        """

    /// The script's `ARGV` (all but the key counts and the tag) for the two policies at `now` (microseconds; nil:
    /// the server's clock).
    public static func arguments(
        address: LimitPolicy, phone: LimitPolicy, nowMicroseconds: UInt64? = nil
    ) -> [[UInt8]] {
        func policy(_ policy: LimitPolicy) -> [[UInt8]] {
            [
                Array(String(policy.requests).utf8), Array(String(policy.period / 1_000).utf8),
                Array(String(policy.block / 1_000).utf8),
            ]
        }
        return policy(address) + policy(phone) + [nowMicroseconds.map { Array(String($0).utf8) } ?? []]
    }

    /// The most keys one carry-over request names (a request has one to nine keys).
    public static let carryOverKeys = 9

    /// The `ARGV` of a carry-over request (all but the key counts and the tag) for `admissions`, in the order of its
    /// keys (at most ``carryOverKeys``): each its kind (`a` address, `p` phone), its count and its window's age;
    /// nil: the server's clock, as for the decisions.
    public static func carryOverArguments(
        address: LimitPolicy, phone: LimitPolicy, admissions: [(kind: Character, count: Int, age: UInt64)],
        nowMicroseconds: UInt64? = nil
    ) -> [[UInt8]] {
        precondition((1...carryOverKeys).contains(admissions.count), "one to nine keys")
        let entries = admissions.map { "\($0.kind):\($0.count):\($0.age / 1_000)" }.joined(separator: " ")
        return arguments(address: address, phone: phone, nowMicroseconds: nowMicroseconds) + [Array(entries.utf8)]
    }

    /// The decisions a reply stands for: the address's, and the phone's when it was decided (nil when the call
    /// named no phone or refused the address). Nil for values the script never returns.
    public static func decisions(
        address: Int64, phone: Int64?
    ) -> (address: LimitDecision, phone: LimitDecision?)? {
        guard let addressDecision = decision(address) else { return nil }
        guard let phone else { return (addressDecision, nil) }
        // The phone is decided only after the address was admitted.
        guard addressDecision == .allowed, let phoneDecision = decision(phone) else { return nil }
        return (addressDecision, phoneDecision)
    }

    /// The decision one value stands for; nil for a value the script never returns.
    public static func decision(_ reply: Int64) -> LimitDecision? {
        guard reply >= 0 else { return nil }
        if reply == 0 { return .allowed }
        return .limited(retryAfter: LimitWindow.seconds(UInt64(reply) * 1_000))
    }
}
