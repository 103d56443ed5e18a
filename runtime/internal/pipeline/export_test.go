package pipeline

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// ReadStart returns the task's start mark; ok is false when it has none
// (or the task's hash is gone).
func ReadStart(ctx context.Context, rdb redis.UniversalClient, key string) (s Start, ok bool, err error) {
	v, err := rdb.HGet(ctx, key, startField).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return Start{}, false, nil
	case err != nil:
		return Start{}, false, err
	}
	s, err = parseStart(v)
	return s, err == nil, err
}
