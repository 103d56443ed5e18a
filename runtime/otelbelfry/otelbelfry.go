// Package otelbelfry traces a belfry runtime with OpenTelemetry: a span for
// each enqueue of an occurrence and one for each execution attempt, the
// attempt linked to the enqueue that made its task. It is opt-in: a service
// that does not import it links no OpenTelemetry.
//
//	tracing := otelbelfry.New(otelbelfry.Config{}) // otel's global TracerProvider
//	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, EnqueueObserver: tracing})
//	...
//	rt.RegisterHandlers(mux, tracing.Middleware())
//
// The spans follow OpenTelemetry's semantic conventions for messaging where
// one fits. An enqueue is a "create" span (kind PRODUCER, named "enqueue
// QUEUE"): the leader enqueues the occurrences due together in shared
// batches, so each occurrence gets a span of its own whose context is its
// creation context, carried in the task's headers (runtime.Carrier). An
// attempt is a "process" span (kind CONSUMER, named "process QUEUE") with a
// span link to that creation context, as the conventions recommend for
// consumers: an attempt runs in a trace of its own (or its caller's, if the
// worker's context has a span), and a tracing backend follows the link to
// the enqueue, whose trace is the scheduler's (a root span per occurrence)
// or, for a manual run, the request that asked for it.
//
// docs/tracing.md lists every attribute.
package otelbelfry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the spans: this package's path.
const ScopeName = "github.com/belfry/belfry/runtime/otelbelfry"

// belfry's own attributes, beside the messaging conventions' ones
// (messaging.system "asynq", messaging.destination.name the queue,
// messaging.message.id the task ID, which is the occurrence's ID).
const (
	// AttrSchedule is the schedule's name (for a family, the family's).
	AttrSchedule = attribute.Key("belfry.schedule")
	// AttrMember is a family member's key; absent for a plain schedule.
	AttrMember = attribute.Key("belfry.member")
	// AttrSlot is the instant the occurrence is for, RFC 3339 in its zone.
	AttrSlot = attribute.Key("belfry.slot")
	// AttrOccurrenceKey is the occurrence's idempotency key, occ.Key():
	// for a re-run, that of the slot's scheduled occurrence.
	AttrOccurrenceKey = attribute.Key("belfry.occurrence.key")
	// AttrManual is true for an operator's occurrence (run now, re-run,
	// backfill).
	AttrManual = attribute.Key("belfry.manual")
	// AttrEnqueueResult is what became of an enqueue: ResultInserted,
	// ResultAlreadyThere, ResultReplanned or ResultError.
	AttrEnqueueResult = attribute.Key("belfry.enqueue.result")
	// AttrAttempt is the attempt's number: 1 for the first, 2 for the
	// first retry (asynq's retry count plus one).
	AttrAttempt = attribute.Key("belfry.attempt")
	// AttrMaxRetry is how many retries the task has in all.
	AttrMaxRetry = attribute.Key("belfry.max_retry")
	// AttrOutcome is how the attempt ended, as the runtime records it:
	// succeeded, retrying (asynq runs it again) or failed (the last
	// attempt). error.type says why one failed: ErrorPanic,
	// ErrorTimeout, ErrorInterrupted, or the returned error's type.
	AttrOutcome = attribute.Key("belfry.outcome")
)

// Values of AttrEnqueueResult.
const (
	// ResultInserted: the task went in.
	ResultInserted = "inserted"
	// ResultAlreadyThere: the occurrence's task ID was taken (another
	// replica, an earlier attempt of this one, a double-submitted manual
	// run): nothing was inserted, and that is no failure. The task that is
	// there carries the trace context of the enqueue that inserted it.
	ResultAlreadyThere = "already_there"
	// ResultError: the enqueue failed; the span has the error, and
	// error.type says what kind of failure it was: ErrorNotLeader,
	// ErrorRedis, ErrorTimeout, ErrorInterrupted, or else the type of the
	// innermost error the runtime's wrapping holds.
	ResultError = "error"
	// ResultReplanned: a pause or resume committed after the leader read
	// the pauses ahead of the slot, so nothing went in and the occurrence
	// is planned again at once (a new enqueue span, or recorded paused).
	// No failure.
	ResultReplanned = "replanned"
)

// Values of error.type on a failed enqueue's span.
const (
	// ErrorNotLeader: the scheduler's enqueue found its lease taken
	// (runtime.ErrNotLeader); the new leader enqueues the occurrence.
	ErrorNotLeader = "not_leader"
	// ErrorRedis: Redis refused the write, the connection failed, or too
	// few replicas acknowledged it (runtime.ErrNotAcked).
	ErrorRedis = "redis"
)

// Values of error.type on an attempt's span, beside the types of returned
// errors (semconv.ErrorType).
const (
	// ErrorPanic: the handler panicked.
	ErrorPanic = "panic"
	// ErrorTimeout: the attempt ran past its timeout. The span ends at the
	// deadline, when asynq gives up on the attempt, whether or not the
	// handler ever returns. On an enqueue's span: its context's deadline
	// passed, or Redis did not answer in time.
	ErrorTimeout = "timeout"
	// ErrorInterrupted: the worker stopped, or the task was cancelled,
	// before the handler returned. On an enqueue's span: its context was
	// cancelled (the caller went away, or the scheduler stopped).
	ErrorInterrupted = "interrupted"
)

// messagingSystem names the engine the runtime enqueues into.
const messagingSystem = "asynq"

// Config configures a Tracer. The zero value uses otel's globals.
type Config struct {
	// TracerProvider makes the spans; nil: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator writes an enqueue's span context into its task and reads
	// it back in the worker. nil: W3C trace context
	// (propagation.TraceContext), whatever otel's global propagator is,
	// since the link depends on it and otel's default global propagator
	// writes nothing. Enqueuers and workers must use the same.
	Propagator propagation.TextMapPropagator
}

// Tracer traces a runtime's enqueues (as its Options.EnqueueObserver) and
// its workers' attempts (Middleware). One Tracer serves any number of
// runtimes and goroutines.
type Tracer struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	carried    int // the keys the propagator writes, to size a carrier
}

var _ core.EnqueueObserver = (*Tracer)(nil)

// New returns a Tracer configured by cfg.
func New(cfg Config) *Tracer {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	prop := cfg.Propagator
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return &Tracer{tracer: tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)), propagator: prop,
		carried: len(prop.Fields())}
}

// startSpan starts an enqueue's or an attempt's span, named as the
// messaging conventions name spans: "OPERATION QUEUE". The schedule's name
// is given at the start, where a sampler sees it (to sample a per-second
// schedule less, say); the other attributes only to a span that records,
// so that an unsampled span costs little, since the leader may enqueue a
// hundred thousand occurrences in one slot.
func (t *Tracer) startSpan(ctx context.Context, kind trace.SpanKind, occ registry.Occurrence, queue string,
	operation attribute.KeyValue, operationName string, links []trace.Link, more ...attribute.KeyValue) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithLinks(links...),
		trace.WithAttributes(AttrSchedule.String(occ.Schedule))}
	if kind == trace.SpanKindProducer && !occ.Manual {
		// The scheduler enqueues with the context Run was given: a span
		// there (a traced start-up) would make every enqueue of the
		// service's life one trace. Each occurrence is a trace of its own.
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := t.tracer.Start(ctx, operationName+" "+queue, opts...)
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := make([]attribute.KeyValue, 0, 10+len(more))
	attrs = append(attrs,
		semconv.MessagingSystemKey.String(messagingSystem),
		operation,
		semconv.MessagingOperationName(operationName),
		semconv.MessagingDestinationName(queue),
		semconv.MessagingMessageID(occ.ID),
		AttrSlot.String(occ.Slot.Format(time.RFC3339)),
		AttrOccurrenceKey.String(occ.Key()),
		AttrManual.Bool(occ.Manual),
	)
	if occ.Member != "" {
		attrs = append(attrs, AttrMember.String(occ.Member))
	}
	span.SetAttributes(append(attrs, more...)...)
	return ctx, span
}

// BeforeEnqueue starts the enqueue's span and returns its context, to be
// carried in the task, and the function that ends the span with the
// enqueue's result. It implements runtime.EnqueueObserver.
func (t *Tracer) BeforeEnqueue(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) (map[string]string, func(inserted bool, err error)) {
	ctx, span := t.startSpan(ctx, trace.SpanKindProducer, occ, s.Queue, semconv.MessagingOperationTypeCreate, "enqueue", nil)
	var carrier map[string]string
	if span.SpanContext().IsValid() { // a no-op provider's spans have nothing to carry
		carrier = make(map[string]string, t.carried)
		t.propagator.Inject(ctx, propagation.MapCarrier(carrier))
	}
	return carrier, func(inserted bool, err error) {
		switch {
		case errors.Is(err, core.ErrPausesChanged):
			span.SetAttributes(AttrEnqueueResult.String(ResultReplanned))
		case err != nil:
			span.SetAttributes(AttrEnqueueResult.String(ResultError), semconv.ErrorTypeKey.String(enqueueErrorType(err)))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case inserted:
			span.SetAttributes(AttrEnqueueResult.String(ResultInserted))
		default:
			span.SetAttributes(AttrEnqueueResult.String(ResultAlreadyThere))
		}
		span.End()
	}
}

// enqueueErrorType names the kind of an enqueue's failure. The runtime
// wraps every enqueue error with the occurrence's ID, so the error's own
// type says nothing; a small vocabulary lets a backend group failures
// across schedules, and what it does not name is known by the type of the
// innermost error.
func enqueueErrorType(err error) string {
	var netErr net.Error
	var redisErr redis.Error
	switch {
	case errors.Is(err, core.ErrNotLeader):
		return ErrorNotLeader
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, core.ErrRedisSlow),
		errors.As(err, &netErr) && netErr.Timeout():
		return ErrorTimeout
	case errors.Is(err, context.Canceled):
		return ErrorInterrupted
	case errors.As(err, &redisErr), errors.As(err, &netErr), errors.Is(err, core.ErrNotAcked),
		errors.Is(err, redis.ErrClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrorRedis
	}
	return semconv.ErrorType(innermost(err)).Value.AsString()
}

// innermost follows err's chain of wrapped errors to its end; of several
// joined errors, it follows the first.
func innermost(err error) error {
	for {
		var next error
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			next = e.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := e.Unwrap(); len(errs) > 0 {
				next = errs[0]
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
}

// Middleware traces each execution attempt of a schedule's handler: pass it
// to the runtime's RegisterHandlers. The handler runs with the attempt's
// span in its context, so its own spans are the attempt's children.
//
// The span ends with the outcome the runtime records: a handler that
// returns an error is retrying or failed by the task's retries left; a
// panic is noted and goes on to the runtime, which records it; an attempt
// that runs past its timeout ends at its deadline, when asynq gives up on
// it, even if the handler never returns, and a handler that returns nil
// after its deadline does not turn it into a success.
func (t *Tracer) Middleware() registry.Middleware {
	return func(s *registry.Schedule, next registry.HandlerFunc) registry.HandlerFunc {
		return func(ctx context.Context, occ registry.Occurrence) (err error) {
			a := t.startAttempt(ctx, s, occ)
			ctx = trace.ContextWithSpan(ctx, a.span)
			// At the deadline (or a cancellation) the attempt is over for
			// asynq and the runtime, whatever the handler does next.
			stop := context.AfterFunc(ctx, func() { a.end(ctx, ctx.Err()) })
			defer stop()
			defer func() {
				if p := recover(); p != nil {
					a.endPanic(p)
					panic(p) // the runtime's recorder turns it into the attempt's error
				}
			}()
			err = next(ctx, occ)
			a.end(ctx, err)
			return err
		}
	}
}

// attempt is one execution attempt's span, ended once, by whichever comes
// first: the handler's return or panic, or the context's end.
type attempt struct {
	span     trace.Span
	retries  int // asynq's retry count: 0 for the first attempt
	maxRetry int
	once     sync.Once
}

func (t *Tracer) startAttempt(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) *attempt {
	retries, _ := asynq.GetRetryCount(ctx)
	maxRetry, ok := asynq.GetMaxRetry(ctx)
	if !ok {
		maxRetry = s.MaxRetry
	}
	queue, ok := asynq.GetQueueName(ctx)
	if !ok {
		queue = s.Queue
	}
	var links []trace.Link
	if carrier := core.Carrier(ctx); len(carrier) > 0 {
		enqueued := trace.SpanContextFromContext(t.propagator.Extract(context.Background(), propagation.MapCarrier(carrier)))
		if enqueued.IsValid() {
			links = []trace.Link{{SpanContext: enqueued}}
		}
	}
	_, span := t.startSpan(ctx, trace.SpanKindConsumer, occ, queue, semconv.MessagingOperationTypeProcess, "process", links,
		AttrAttempt.Int(retries+1), AttrMaxRetry.Int(maxRetry))
	return &attempt{span: span, retries: retries, maxRetry: maxRetry}
}

// end ends the span with the attempt's outcome: err is what the handler
// returned, or the context's error when it ended first.
func (a *attempt) end(ctx context.Context, err error) {
	a.once.Do(func() {
		if err == nil && ctx.Err() != nil {
			err = ctx.Err() // returned nil after its deadline: asynq failed it
		}
		if err == nil {
			a.span.SetAttributes(AttrOutcome.String(string(core.OutcomeSucceeded)))
			a.span.End()
			return
		}
		errorType := semconv.ErrorType(err)
		switch ctxErr := ctx.Err(); {
		case ctxErr == nil || !errors.Is(err, ctxErr):
		case errors.Is(ctxErr, context.DeadlineExceeded):
			errorType, err = semconv.ErrorTypeKey.String(ErrorTimeout), fmt.Errorf("timed out: %w", err)
		default:
			errorType, err = semconv.ErrorTypeKey.String(ErrorInterrupted), fmt.Errorf("interrupted: %w", err)
		}
		a.fail(errorType, err, errors.Is(err, asynq.SkipRetry))
	})
}

// endPanic ends the span of an attempt whose handler panicked with p.
func (a *attempt) endPanic(p any) {
	a.once.Do(func() {
		// The stack, taken while the panic unwinds, still shows where the
		// handler panicked.
		a.fail(semconv.ErrorTypeKey.String(ErrorPanic), fmt.Errorf("panic: %v", p), false, trace.WithStackTrace(true))
	})
}

// fail ends the span of a failed attempt: retrying while retries are left
// (and the error does not skip them), else failed.
func (a *attempt) fail(errorType attribute.KeyValue, err error, skipRetry bool, opts ...trace.EventOption) {
	outcome := core.OutcomeFailed
	if a.retries < a.maxRetry && !skipRetry {
		outcome = core.OutcomeRetrying
	}
	a.span.SetAttributes(AttrOutcome.String(string(outcome)), errorType)
	a.span.RecordError(err, opts...)
	a.span.SetStatus(codes.Error, err.Error())
	a.span.End()
}
