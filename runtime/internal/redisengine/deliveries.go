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

// Attempt is asynq's retry count of ctx's task and its max retry, each
// with the retries its occurrence's earlier tasks used when the task
// continues an interrupted one (WithRetriedBefore).
func (AsynqDeliveries) Attempt(ctx context.Context) (attempt, maxRetry int, known bool) {
	attempt, _ = asynq.GetRetryCount(ctx)
	maxRetry, known = asynq.GetMaxRetry(ctx)
	before, _ := ctx.Value(retriedBeforeKey{}).(int)
	return attempt + before, maxRetry + before, known
}

type retriedBeforeKey struct{}

// WithRetriedBefore returns ctx noting that the occurrence's tasks before
// ctx's (a continuation's) used n retries.
func WithRetriedBefore(ctx context.Context, n int) context.Context {
	if n == 0 {
		return ctx
	}
	return context.WithValue(ctx, retriedBeforeKey{}, n)
}

// SkipsRetry says whether err wraps asynq.SkipRetry.
func (AsynqDeliveries) SkipsRetry(err error) bool { return errors.Is(err, asynq.SkipRetry) }
