package redisengine

import (
	"context"
	"errors"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/hibiken/asynq"
)

var _ engine.Deliveries = (*Engine)(nil)

// AsynqDeliveries reads asynq's deliveries: the Redis engine's, and those
// of workers whose runtime has no engine (RegisterHandlers serves asynq's
// workers whether or not the runtime schedules).
type AsynqDeliveries struct{}

// Attempt is asynq's retry count of ctx's task and its max retry.
func (AsynqDeliveries) Attempt(ctx context.Context) (attempt, maxRetry int, known bool) {
	attempt, _ = asynq.GetRetryCount(ctx)
	maxRetry, known = asynq.GetMaxRetry(ctx)
	return attempt, maxRetry, known
}

// SkipsRetry says whether err wraps asynq.SkipRetry.
func (AsynqDeliveries) SkipsRetry(err error) bool { return errors.Is(err, asynq.SkipRetry) }
