package redistest

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// CountCommands counts the commands rdb sends from now on, each command of a
// pipeline included, for tests that check what a reader costs. Not counted:
// a new connection's handshake (HELLO, CLIENT SETINFO), since how many
// connections the pool opens is not the reader's doing, and commands on
// asynq's own keys (its inspector's look at the live servers), whose
// number is that of the asynq servers on the shared Redis.
func CountCommands(rdb *redis.Client) *atomic.Int64 {
	var n atomic.Int64
	rdb.AddHook(commandCounter{&n})
	return &n
}

type commandCounter struct{ n *atomic.Int64 }

func (c commandCounter) count(cmd redis.Cmder) {
	if name := cmd.Name(); name == "hello" || name == "client" {
		return
	}
	if args := cmd.Args(); len(args) > 1 {
		if key, ok := args[1].(string); ok && strings.HasPrefix(key, "asynq:") {
			return
		}
	}
	c.n.Add(1)
}

func (c commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// CommandStat is one command's line of INFO commandstats: how often Redis
// ran it, the calls a script makes included, and its time inside Redis.
type CommandStat struct {
	Calls, Usec int64
}

// CommandStats reads INFO commandstats, by command name ("eval", "hset").
func CommandStats(ctx context.Context, rdb redis.Cmdable) (map[string]CommandStat, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]CommandStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st CommandStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out, nil
}
