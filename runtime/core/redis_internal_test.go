package core

import "github.com/belfry/belfry/runtime/internal/redisengine"

// redisEngine is the Redis engine a test built the runtime on
// (redisengine.NewPending as Options.Engine), for the tests that play a
// stalled holder or a lost write on its lease and keys.
func (r *Runtime) redisEngine() *redisengine.Engine { return r.eng.(*redisengine.Engine) }
