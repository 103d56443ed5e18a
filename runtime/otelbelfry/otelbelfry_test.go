package otelbelfry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/otelbelfry"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spans is what a test's tracer provider recorded.
type spans struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newSpans() *spans {
	rec := tracetest.NewSpanRecorder()
	return &spans{rec: rec, tp: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
}

// of returns the ended spans of kind whose attribute key is value, in the
// order they ended.
func (s *spans) of(kind trace.SpanKind, key attribute.Key, value string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, span := range s.rec.Ended() {
		if v, ok := attr(span, key); span.SpanKind() == kind && ok && v.Emit() == value {
			out = append(out, span)
		}
	}
	return out
}

// waitFor waits for want ended spans of kind whose key is value.
func (s *spans) waitFor(t *testing.T, want int, kind trace.SpanKind, key attribute.Key, value string) []sdktrace.ReadOnlySpan {
	t.Helper()
	redistest.WaitFor(t, 15*time.Second, kind.String()+" spans of "+value, func() bool { return len(s.of(kind, key, value)) >= want })
	return s.of(kind, key, value)
}

func attr(span sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range span.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs reports each of want's attributes the span lacks or has
// another value of.
func wantAttrs(t *testing.T, span sdktrace.ReadOnlySpan, want ...attribute.KeyValue) {
	t.Helper()
	for _, kv := range want {
		if got, ok := attr(span, kv.Key); !ok || got != kv.Value {
			t.Errorf("span %q: %s = %q (set %v), want %q", span.Name(), kv.Key, got.Emit(), ok, kv.Value.Emit())
		}
	}
}

// linksTo reports whether the span links to the enqueue span, and to no
// other. The link's context came out of the task's headers, so it is
// remote: trace and span IDs are what must match.
func linksTo(span, enqueue sdktrace.ReadOnlySpan) bool {
	links := span.Links()
	return len(links) == 1 && links[0].SpanContext.TraceID() == enqueue.SpanContext().TraceID() &&
		links[0].SpanContext.SpanID() == enqueue.SpanContext().SpanID()
}

// service runs reg on the shared Redis, traced, with an asynq server on
// queue that retries at once, until the test ends.
func service(t *testing.T, reg *registry.Registry, queue string, tracer *otelbelfry.Tracer) *runtime.Runtime {
	t.Helper()
	rdb := redistest.Shared(t)
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: redistest.Uniq("otel"), LeaseTTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), EnqueueObserver: tracer})
	if err != nil {
		t.Fatal(err)
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Queues: map[string]int{queue: 1}, Concurrency: 4, TaskCheckInterval: 20 * time.Millisecond,
		DelayedTaskCheckInterval: 50 * time.Millisecond, LogLevel: asynq.FatalLevel, ShutdownTimeout: 5 * time.Second,
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return time.Millisecond },
	})
	mux := asynq.NewServeMux()
	rt.RegisterHandlers(mux, tracer.Middleware())
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; rt.Close() })
	return rt
}

// oneSchedule runs a traced service of one schedule, on a queue of its
// own, whose handler does nothing.
func oneSchedule(t *testing.T, name, expr string) (*spans, *runtime.Runtime, *registry.Schedule) {
	t.Helper()
	sp := newSpans()
	queue := redistest.Uniq("q")
	reg := registry.MustNew(registry.Schedule{Name: name, Expr: expr, Queue: queue,
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt := service(t, reg, queue, otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp}))
	s, _ := reg.Lookup(name)
	return sp, rt, s
}

// handlerSpans notes the span context each handler run found in its
// context, by task ID.
type handlerSpans struct{ m sync.Map }

func (h *handlerSpans) note(ctx context.Context, occ registry.Occurrence) {
	h.m.Store(occ.ID, trace.SpanContextFromContext(ctx))
}

func (h *handlerSpans) of(id string) trace.SpanContext {
	sc, _ := h.m.Load(id)
	sc2, _ := sc.(trace.SpanContext)
	return sc2
}

// The leader's enqueues, of a schedule and of a family member, each have a
// span that names the occurrence and says it was inserted, and the attempt
// that ran it links to that span, with the handler running inside the
// attempt's span.
func TestScheduledExecutionLinksToItsEnqueue(t *testing.T) {
	t.Parallel()
	sp := newSpans()
	queue := redistest.Uniq("q")
	var seen handlerSpans
	handler := func(ctx context.Context, occ registry.Occurrence) error { seen.note(ctx, occ); return nil }
	reg := registry.MustNew(
		registry.Schedule{Name: "tick", Expr: "* * * * * *", Queue: queue, Handler: handler},
		registry.Schedule{Name: "report", Expr: "* * * * * *", Per: "tenant", Queue: queue, Handler: handler},
	)
	rt := service(t, reg, queue, otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp}))
	if _, err := rt.Families().Set(context.Background(), "report", runtime.Member{Key: "acme"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tick", "report"} {
		process := sp.waitFor(t, 1, trace.SpanKindConsumer, otelbelfry.AttrSchedule, name)[0]
		id, _ := attr(process, semconv.MessagingMessageIDKey)
		enqueues := sp.waitFor(t, 1, trace.SpanKindProducer, semconv.MessagingMessageIDKey, id.AsString())
		if len(enqueues) != 1 {
			t.Fatalf("%s: %d enqueue spans of %s, want 1", name, len(enqueues), id.AsString())
		}
		enqueue := enqueues[0]
		// A scheduled ID ends in its slot's Unix seconds.
		slotSeconds, _ := strconv.ParseInt(id.AsString()[strings.LastIndexByte(id.AsString(), ':')+1:], 10, 64)
		slot, _ := attr(enqueue, otelbelfry.AttrSlot)
		if at, err := time.Parse(time.RFC3339, slot.AsString()); err != nil || at.Unix() != slotSeconds {
			t.Errorf("%s: slot attribute %q, want the ID's slot %d", name, slot.AsString(), slotSeconds)
		}
		common := []attribute.KeyValue{
			otelbelfry.AttrSchedule.String(name),
			otelbelfry.AttrOccurrenceKey.String(id.AsString()),
			otelbelfry.AttrManual.Bool(false),
			semconv.MessagingSystemKey.String("asynq"),
			semconv.MessagingDestinationName(queue),
		}
		if name == "report" {
			common = append(common, otelbelfry.AttrMember.String("acme"))
			if !strings.Contains(id.AsString(), ":member:acme:") {
				t.Errorf("family's task ID %s does not name its member", id.AsString())
			}
		} else if _, ok := attr(enqueue, otelbelfry.AttrMember); ok {
			t.Errorf("a plain schedule's enqueue span has a member")
		}
		wantAttrs(t, enqueue, append(common, semconv.MessagingOperationTypeCreate,
			otelbelfry.AttrEnqueueResult.String(otelbelfry.ResultInserted))...)
		wantAttrs(t, process, append(common, semconv.MessagingOperationTypeProcess,
			otelbelfry.AttrAttempt.Int(1), otelbelfry.AttrOutcome.String("succeeded"))...)
		if enqueue.Name() != "enqueue "+queue || process.Name() != "process "+queue {
			t.Errorf("%s: spans named %q and %q", name, enqueue.Name(), process.Name())
		}
		if enqueue.Parent().IsValid() {
			t.Errorf("%s: the leader's enqueue span has a parent %v, want a root", name, enqueue.Parent())
		}
		if !linksTo(process, enqueue) {
			t.Errorf("%s: the attempt links to %v, want its enqueue %v", name, process.Links(), enqueue.SpanContext())
		}
		if process.Status().Code != codes.Unset {
			t.Errorf("%s: a successful attempt's status %v", name, process.Status())
		}
		if got := seen.of(id.AsString()); !got.Equal(process.SpanContext()) {
			t.Errorf("%s: the handler ran in span %v, want the attempt's %v", name, got, process.SpanContext())
		}
	}
}

// When the leader finds a slot's task already there (enqueued by an
// earlier holder), its enqueue span says so and is no error; the task that
// ran is the one that was there, which carried no trace context, so its
// attempt links to nothing.
func TestLeadersEnqueueOfATaskAlreadyThereSaysSo(t *testing.T) {
	t.Parallel()
	sp, rt, s := oneSchedule(t, "tick", "* * * * * *")
	queue := s.Queue
	// A slot the new leader has not reached: it starts from the moment it leads.
	redistest.WaitFor(t, 10*time.Second, "a leader", rt.Leadership().Leading)
	slot := time.Now().Truncate(time.Second).Add(2 * time.Second).UTC()
	occ := registry.Occurrence{Schedule: "tick", Slot: slot, Zone: "UTC",
		ID: registry.Scope{Namespace: rt.Namespace(), Schedule: "tick"}.ID(slot)}
	// Retained once run, as the runtime retains a scheduled task, so that
	// its ID stays taken.
	client := asynq.NewClientFromRedisClient(redistest.Shared(t))
	if _, err := client.Enqueue(asynq.NewTask("tick", registry.EncodeOccurrence(occ)), asynq.TaskID(occ.ID), asynq.Queue(queue),
		asynq.Retention(time.Minute)); err != nil {
		t.Fatal(err)
	}
	enqueue := sp.waitFor(t, 1, trace.SpanKindProducer, semconv.MessagingMessageIDKey, occ.ID)[0]
	wantAttrs(t, enqueue, otelbelfry.AttrEnqueueResult.String(otelbelfry.ResultAlreadyThere), otelbelfry.AttrSlot.String(slot.Format(time.RFC3339)))
	if enqueue.Status().Code != codes.Unset {
		t.Errorf("a conflict's enqueue span has status %v, want none", enqueue.Status())
	}
	attempt := sp.waitFor(t, 1, trace.SpanKindConsumer, semconv.MessagingMessageIDKey, occ.ID)[0]
	if links := attempt.Links(); len(links) != 0 {
		t.Errorf("the attempt of a task enqueued without tracing links to %v", links)
	}
}

// A manual run's enqueue joins its caller's trace; a double submit's
// second enqueue says the occurrence was already there; a failing first
// attempt is an error span that says it will be retried, and the retry a
// second attempt span, both linked to the enqueue that inserted the task.
func TestManualRunRetryAndDoubleSubmitAreTraced(t *testing.T) {
	t.Parallel()
	sp := newSpans()
	queue := redistest.Uniq("q")
	var calls sync.Map
	reg := registry.MustNew(registry.Schedule{Name: "flaky", Expr: "17 3 * * *", Queue: queue, MaxRetry: 2,
		Handler: func(ctx context.Context, occ registry.Occurrence) error {
			if _, again := calls.LoadOrStore(occ.ID, true); !again {
				return errors.New("connection reset by peer")
			}
			return nil
		}})
	rt := service(t, reg, queue, otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp}))
	ctx, request := sp.tp.Tracer("test").Start(context.Background(), "POST /schedules/flaky/run")
	occ, err := rt.Trigger(ctx, "flaky", "request-1")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := rt.Trigger(ctx, "flaky", "request-1"); err != nil || again.ID != occ.ID {
		t.Fatalf("double submit: %v, %v; want the same occurrence", again.ID, err)
	}
	request.End()
	enqueues := sp.waitFor(t, 2, trace.SpanKindProducer, semconv.MessagingMessageIDKey, occ.ID)
	if len(enqueues) != 2 {
		t.Fatalf("%d enqueue spans, want 2", len(enqueues))
	}
	for i, result := range []string{otelbelfry.ResultInserted, otelbelfry.ResultAlreadyThere} {
		wantAttrs(t, enqueues[i], otelbelfry.AttrEnqueueResult.String(result), otelbelfry.AttrManual.Bool(true),
			otelbelfry.AttrOccurrenceKey.String(occ.Key()), otelbelfry.AttrSchedule.String("flaky"))
		if enqueues[i].Parent().SpanID() != request.SpanContext().SpanID() {
			t.Errorf("enqueue %d's parent %v, want the request's span %v", i, enqueues[i].Parent(), request.SpanContext())
		}
		if enqueues[i].Status().Code != codes.Unset {
			t.Errorf("enqueue %d (%s) has status %v", i, result, enqueues[i].Status())
		}
	}
	attempts := sp.waitFor(t, 2, trace.SpanKindConsumer, semconv.MessagingMessageIDKey, occ.ID)
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	first, second := attempts[0], attempts[1]
	wantAttrs(t, first, otelbelfry.AttrAttempt.Int(1), otelbelfry.AttrMaxRetry.Int(2),
		otelbelfry.AttrOutcome.String("retrying"), semconv.ErrorTypeKey.String("*errors.errorString"))
	if first.Status().Code != codes.Error || first.Status().Description != "connection reset by peer" {
		t.Errorf("the failed attempt's status %v, want an error with its message", first.Status())
	}
	if events := first.Events(); len(events) != 1 || events[0].Name != semconv.ExceptionEventName {
		t.Errorf("the failed attempt's events %v, want the error recorded", events)
	}
	wantAttrs(t, second, otelbelfry.AttrAttempt.Int(2), otelbelfry.AttrOutcome.String("succeeded"))
	for i, a := range attempts {
		if !linksTo(a, enqueues[0]) {
			t.Errorf("attempt %d links to %v, want the inserting enqueue %v", i+1, a.Links(), enqueues[0].SpanContext())
		}
	}
	if first.SpanContext().TraceID() == second.SpanContext().TraceID() {
		t.Errorf("both attempts in one trace; each attempt is its own, linked to the enqueue")
	}
}

// A re-run's span carries the key of the slot's scheduled occurrence,
// which is not its task ID.
func TestRerunSpanCarriesTheSlotsKey(t *testing.T) {
	t.Parallel()
	sp, rt, s := oneSchedule(t, "nightly", "17 3 * * *")
	slot := s.Next(time.Now().Add(-25 * time.Hour))
	occ, err := rt.Rerun(context.Background(), "nightly", slot, "")
	if err != nil {
		t.Fatal(err)
	}
	if occ.Key() == occ.ID {
		t.Fatalf("re-run %s has its ID as key", occ.ID)
	}
	enqueue := sp.waitFor(t, 1, trace.SpanKindProducer, semconv.MessagingMessageIDKey, occ.ID)[0]
	wantAttrs(t, enqueue, otelbelfry.AttrOccurrenceKey.String(occ.Key()), otelbelfry.AttrSlot.String(slot.Format(time.RFC3339)),
		otelbelfry.AttrManual.Bool(true), otelbelfry.AttrEnqueueResult.String(otelbelfry.ResultInserted))
	attempt := sp.waitFor(t, 1, trace.SpanKindConsumer, semconv.MessagingMessageIDKey, occ.ID)[0]
	wantAttrs(t, attempt, otelbelfry.AttrOccurrenceKey.String(occ.Key()), otelbelfry.AttrOutcome.String("succeeded"))
	if !linksTo(attempt, enqueue) {
		t.Errorf("the re-run's attempt links to %v, want %v", attempt.Links(), enqueue.SpanContext())
	}
}

// A panic and a run past the timeout end their attempt spans as the
// runtime records them: failed, with error.type panic or timeout; the
// timed-out span ends at the deadline although its handler has not
// returned; and the panic the middleware noted reaches the runtime's
// record with the handler's frame first.
func TestPanicsAndTimeoutsEndAttemptsAsRecorded(t *testing.T) {
	t.Parallel()
	sp := newSpans()
	queue := redistest.Uniq("q")
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	reg := registry.MustNew(
		registry.Schedule{Name: "panics", Expr: "17 3 * * *", Queue: queue, MaxRetry: 0,
			Handler: func(context.Context, registry.Occurrence) error {
				var m map[string]int
				m["boom"]++ // assignment to entry in nil map
				return nil
			}},
		registry.Schedule{Name: "hangs", Expr: "17 3 * * *", Queue: queue, MaxRetry: 0, Timeout: time.Second,
			Handler: func(context.Context, registry.Occurrence) error {
				<-release // ignores its context
				return nil
			}},
	)
	rt := service(t, reg, queue, otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp}))
	ctx := context.Background()
	triggered := time.Now() // before asynq could take either task
	for _, s := range reg.Schedules() {
		if _, err := rt.Trigger(ctx, s.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	panicked := sp.waitFor(t, 1, trace.SpanKindConsumer, otelbelfry.AttrSchedule, "panics")[0]
	wantAttrs(t, panicked, otelbelfry.AttrOutcome.String("failed"), semconv.ErrorTypeKey.String(otelbelfry.ErrorPanic))
	if st := panicked.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "assignment to entry in nil map") {
		t.Errorf("the panicked attempt's status %v, want an error with the panic's value", st)
	}
	hung := sp.waitFor(t, 1, trace.SpanKindConsumer, otelbelfry.AttrSchedule, "hangs")[0] // its handler still blocks
	wantAttrs(t, hung, otelbelfry.AttrOutcome.String("failed"), semconv.ErrorTypeKey.String(otelbelfry.ErrorTimeout))
	// The deadline was set when asynq took the task, after the trigger and
	// before the span began (how long before depends on the machine's
	// load): the span ends at the deadline, not when the handler returns.
	if deadline := triggered.Add(time.Second); hung.EndTime().Before(deadline) {
		t.Errorf("the timed-out attempt's span ended %s before its 1s timeout could", deadline.Sub(hung.EndTime()))
	}
	if took := hung.EndTime().Sub(hung.StartTime()); took > 3*time.Second {
		t.Errorf("the timed-out attempt's span lasted %s, want about its 1s timeout", took)
	}
	var rec runtime.Record
	redistest.WaitFor(t, 10*time.Second, "the panic's record", func() bool {
		h, _ := rt.History(ctx, "panics", 1)
		if len(h) == 1 {
			rec = h[0]
		}
		return rec.Outcome == runtime.OutcomeFailed
	})
	if lines := strings.Split(rec.Error, "\n"); len(lines) < 2 || !strings.Contains(lines[1], "TestPanicsAndTimeoutsEndAttemptsAsRecorded") {
		t.Errorf("the panic's record %q; want the handler's frame first", rec.Error)
	}
}

// Each way an attempt ends, outside asynq (no retry count in the context:
// the first attempt, with the schedule's retries): the outcome and
// error.type the span ends with, and that it ends when the context does
// for a handler that has not returned.
func TestAttemptOutcomes(t *testing.T) {
	t.Parallel()
	errBroken := errors.New("still broken")
	for _, tc := range []struct {
		name      string
		maxRetry  int
		handler   func(ctx context.Context, cancel context.CancelFunc) error
		deadline  bool
		outcome   string
		errorType string // "" for none
	}{
		{name: "success", outcome: "succeeded",
			handler: func(context.Context, context.CancelFunc) error { return nil }},
		{name: "error with retries left", maxRetry: 3, outcome: "retrying", errorType: "*errors.errorString",
			handler: func(context.Context, context.CancelFunc) error { return errBroken }},
		{name: "error on the last attempt", outcome: "failed", errorType: "*errors.errorString",
			handler: func(context.Context, context.CancelFunc) error { return errBroken }},
		{name: "error that skips its retries", maxRetry: 3, outcome: "failed",
			handler: func(context.Context, context.CancelFunc) error { return fmt.Errorf("bad input: %w", asynq.SkipRetry) }},
		{name: "nil after the deadline", deadline: true, outcome: "failed", errorType: otelbelfry.ErrorTimeout,
			handler: func(ctx context.Context, _ context.CancelFunc) error { <-ctx.Done(); return nil }},
		{name: "interrupted", maxRetry: 1, outcome: "retrying", errorType: otelbelfry.ErrorInterrupted,
			handler: func(ctx context.Context, cancel context.CancelFunc) error { cancel(); <-ctx.Done(); return ctx.Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := newSpans()
			s := &registry.Schedule{Name: "job", Queue: "default", MaxRetry: tc.maxRetry}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.deadline {
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			}
			h := otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp}).Middleware()(s,
				func(ctx context.Context, occ registry.Occurrence) error { return tc.handler(ctx, cancel) })
			h(ctx, benchOccurrence())
			ended := sp.rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans ended, want 1", len(ended))
			}
			wantAttrs(t, ended[0], otelbelfry.AttrOutcome.String(tc.outcome), otelbelfry.AttrAttempt.Int(1),
				otelbelfry.AttrMaxRetry.Int(tc.maxRetry))
			got, set := attr(ended[0], semconv.ErrorTypeKey)
			switch {
			case tc.errorType == "" && tc.outcome == "succeeded" && set:
				t.Errorf("a success has error.type %q", got.Emit())
			case tc.errorType != "" && got.Emit() != tc.errorType:
				t.Errorf("error.type %q, want %q", got.Emit(), tc.errorType)
			}
			if wantErr := tc.outcome != "succeeded"; (ended[0].Status().Code == codes.Error) != wantErr {
				t.Errorf("status %v", ended[0].Status())
			}
		})
	}
}

// The scheduler's enqueue spans are roots, one trace per occurrence, even
// when the context Run was given holds a span (a service that traces its
// start-up): otherwise every enqueue of the service's life would be one
// trace. A manual run's enqueue stays in its caller's trace.
func TestScheduledEnqueueIsARootWhateverRunsContextHolds(t *testing.T) {
	sp := newSpans()
	tracer := otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp})
	ctx, startup := sp.tp.Tracer("test").Start(context.Background(), "start-up")
	defer startup.End()
	s := &registry.Schedule{Name: "tick", Queue: "default"}
	scheduled, manual := benchOccurrence(), benchOccurrence()
	manual.Manual, manual.ID = true, "cron:ns/tick:manual:r1"
	for _, occ := range []registry.Occurrence{scheduled, manual} {
		_, done := tracer.BeforeEnqueue(ctx, s, occ)
		done(true, nil)
	}
	enqueue := func(id string) sdktrace.ReadOnlySpan {
		t.Helper()
		spans := sp.of(trace.SpanKindProducer, semconv.MessagingMessageIDKey, id)
		if len(spans) != 1 {
			t.Fatalf("%d enqueue spans of %s, want 1", len(spans), id)
		}
		return spans[0]
	}
	if got := enqueue(scheduled.ID); got.Parent().IsValid() || got.SpanContext().TraceID() == startup.SpanContext().TraceID() {
		t.Errorf("the scheduled enqueue's parent is %v in trace %v; want a root of its own trace", got.Parent(), got.SpanContext().TraceID())
	}
	if got := enqueue(manual.ID); got.Parent().SpanID() != startup.SpanContext().SpanID() {
		t.Errorf("the manual enqueue's parent is %v, want the caller's span %v", got.Parent(), startup.SpanContext())
	}
}

// With otel's default no-op provider nothing is carried: the task stays as
// it is without a tracer.
func TestNoopProviderCarriesNothing(t *testing.T) {
	tracer := otelbelfry.New(otelbelfry.Config{TracerProvider: noop.NewTracerProvider()})
	s := &registry.Schedule{Name: "tick", Queue: "default"}
	carrier, done := tracer.BeforeEnqueue(context.Background(), s, registry.Occurrence{Schedule: "tick", ID: "cron:tick:1"})
	done(true, nil)
	if len(carrier) != 0 {
		t.Errorf("carrier %v, want none", carrier)
	}
}

// An enqueue that a pause or resume since the leader's read ahead turned
// back is replanned, not failed: no error status, and not "already_there",
// which would say the occurrence is in.
func TestAnEnqueueTurnedBackByAPauseChangeIsReplanned(t *testing.T) {
	sp := newSpans()
	_, done := otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp}).BeforeEnqueue(context.Background(),
		&registry.Schedule{Name: "tick", Queue: "default"}, benchOccurrence())
	done(false, fmt.Errorf("enqueue cron:ns/tick:1793610000: %w", runtime.ErrPausesChanged))
	ended := sp.rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans, want 1", len(ended))
	}
	wantAttrs(t, ended[0], otelbelfry.AttrEnqueueResult.String(otelbelfry.ResultReplanned))
	if code := ended[0].Status().Code; code == codes.Error {
		t.Errorf("status %v, want no error", ended[0].Status())
	}
}

// A failed enqueue's error.type says what kind of failure it was, through
// the runtime's wrapping: a small vocabulary, else the innermost error's
// type.
func TestEnqueueErrorTypes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("enqueue cron:ns/tick:1793610000: %w", err) }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{runtime.ErrNotLeader, otelbelfry.ErrorNotLeader},
		{wrap(runtime.ErrNotLeader), otelbelfry.ErrorNotLeader},
		{wrap(context.DeadlineExceeded), otelbelfry.ErrorTimeout},
		{wrap(&net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}), otelbelfry.ErrorTimeout},
		{wrap(context.Canceled), otelbelfry.ErrorInterrupted},
		{wrap(refused), otelbelfry.ErrorRedis},
		{wrap(scriptError("ERR Error running script")), otelbelfry.ErrorRedis},
		{wrap(io.EOF), otelbelfry.ErrorRedis},
		{wrap(redis.ErrClosed), otelbelfry.ErrorRedis},
		{wrap(runtime.ErrNotAcked), otelbelfry.ErrorRedis},
		{wrap(fmt.Errorf("hook: %w", &customError{})), "*otelbelfry_test.customError"},
		{wrap(errors.Join(&customError{}, errors.New("and more"))), "*otelbelfry_test.customError"},
		{fmt.Errorf("two: %w, %w", &customError{}, io.ErrShortWrite), "*otelbelfry_test.customError"},
	} {
		sp := newSpans()
		_, done := otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp}).BeforeEnqueue(context.Background(),
			&registry.Schedule{Name: "tick", Queue: "default"}, benchOccurrence())
		done(false, tc.err)
		ended := sp.rec.Ended()
		if len(ended) != 1 {
			t.Fatalf("%v: %d spans, want 1", tc.err, len(ended))
		}
		wantAttrs(t, ended[0], otelbelfry.AttrEnqueueResult.String(otelbelfry.ResultError), semconv.ErrorTypeKey.String(tc.want))
		if ended[0].Status().Code != codes.Error {
			t.Errorf("%v: status %v, want an error", tc.err, ended[0].Status())
		}
	}
}

// A real failed enqueue, a manual run on a Redis client that is closed,
// is a Redis failure, whatever the runtime wraps it in.
func TestFailedManualEnqueueIsARedisError(t *testing.T) {
	sp := newSpans()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()})
	reg := registry.MustNew(registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Queue: redistest.Uniq("q"),
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := runtime.New(reg, runtime.Options{Redis: rdb, Namespace: redistest.Uniq("otel"), Logger: slog.New(slog.DiscardHandler),
		EnqueueObserver: otelbelfry.New(otelbelfry.Config{TracerProvider: sp.tp})})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rdb.Close()
	if _, err := rt.Trigger(context.Background(), "nightly", ""); err == nil {
		t.Fatal("Trigger on a closed client succeeded")
	}
	enqueues := sp.of(trace.SpanKindProducer, otelbelfry.AttrSchedule, "nightly")
	if len(enqueues) != 1 {
		t.Fatalf("%d enqueue spans, want 1", len(enqueues))
	}
	wantAttrs(t, enqueues[0], otelbelfry.AttrEnqueueResult.String(otelbelfry.ResultError), semconv.ErrorTypeKey.String(otelbelfry.ErrorRedis))
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// scriptError is an error reply of Redis, as go-redis returns one.
type scriptError string

func (e scriptError) Error() string { return string(e) }
func (scriptError) RedisError()     {}

type customError struct{}

func (*customError) Error() string { return "custom" }

// A sampler sees the schedule's name when a span starts, an enqueue's and
// an attempt's alike, so a service can trace a per-second schedule less
// than the rest, its enqueues and attempts together.
func TestSamplerSeesTheSchedule(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(dropSchedule("tick")))
	tracer := otelbelfry.New(otelbelfry.Config{TracerProvider: tp})
	for _, name := range []string{"tick", "nightly"} {
		occ := benchOccurrence()
		occ.Schedule = name
		s := &registry.Schedule{Name: name, Queue: "default"}
		_, done := tracer.BeforeEnqueue(context.Background(), s, occ)
		done(true, nil)
		tracer.Middleware()(s, func(context.Context, registry.Occurrence) error { return nil })(context.Background(), occ)
	}
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans, want nightly's enqueue and attempt alone", len(ended))
	}
	for i, kind := range []trace.SpanKind{trace.SpanKindProducer, trace.SpanKindConsumer} {
		if ended[i].SpanKind() != kind {
			t.Errorf("span %d is a %v, want a %v", i, ended[i].SpanKind(), kind)
		}
		wantAttrs(t, ended[i], otelbelfry.AttrSchedule.String("nightly"), semconv.MessagingMessageID("cron:ns/tick:1793610000"))
	}
}

// dropSchedule samples every span but those of one schedule.
type dropSchedule string

func (d dropSchedule) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, kv := range p.Attributes {
		if kv.Key == otelbelfry.AttrSchedule && kv.Value.AsString() == string(d) {
			return sdktrace.SamplingResult{Decision: sdktrace.Drop}
		}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (d dropSchedule) Description() string { return "drop " + string(d) }

// What tracing adds to each enqueue: the span, its carrier (which goes in
// the task's headers) and its end, beside encoding the payload, with a provider that samples every span (or none) and
// exports nothing. BenchmarkEnqueuePayloadUntraced is the payload alone.
func BenchmarkEnqueueSpan(b *testing.B) {
	for name, sampler := range map[string]sdktrace.Sampler{"sampled": sdktrace.AlwaysSample(), "unsampled": sdktrace.NeverSample()} {
		b.Run(name, func(b *testing.B) {
			tracer := otelbelfry.New(otelbelfry.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))})
			s := &registry.Schedule{Name: "tick", Queue: "default"}
			occ := benchOccurrence()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, done := tracer.BeforeEnqueue(ctx, s, occ)
				registry.EncodeOccurrence(occ)
				done(true, nil)
			}
		})
	}
}

func BenchmarkEnqueuePayloadUntraced(b *testing.B) {
	occ := benchOccurrence()
	b.ReportAllocs()
	for b.Loop() {
		registry.EncodeOccurrence(occ)
	}
}

func benchOccurrence() registry.Occurrence {
	return registry.Occurrence{Schedule: "tick", Slot: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Zone: "UTC",
		ID: "cron:ns/tick:1793610000"}
}
