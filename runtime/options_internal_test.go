package runtime

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// Every field of core.Options but Engine is a field of Options of the same
// type, and New passes it on intact: a field added to core.Options and not
// here, or left out of the conversion, fails this test.
func TestOptionsCarryEveryCoreOption(t *testing.T) {
	t.Parallel()
	coreType, ownType := reflect.TypeFor[core.Options](), reflect.TypeFor[Options]()
	var opts Options
	want := reflect.New(coreType).Elem()
	for i := range coreType.NumField() {
		field := coreType.Field(i)
		if field.Name == "Engine" {
			continue // the engine New builds, not the caller's value
		}
		own, ok := ownType.FieldByName(field.Name)
		if !ok || own.Type != field.Type {
			t.Errorf("core.Options.%s (%s) has no field of its name and type in runtime.Options", field.Name, field.Type)
			continue
		}
		v := nonZeroOf(t, field.Type, i)
		reflect.ValueOf(&opts).Elem().FieldByIndex(own.Index).Set(v)
		want.Field(i).Set(v)
	}
	got := reflect.ValueOf(opts.core(nil))
	for i := range coreType.NumField() {
		if name := coreType.Field(i).Name; !got.Field(i).Equal(want.Field(i)) {
			t.Errorf("core.Options.%s after the conversion: %v; want %v", name, got.Field(i), want.Field(i))
		}
	}
}

// nonZeroOf returns a value of type typ that is not its zero value and
// differs by seed from the other fields'.
func nonZeroOf(t *testing.T, typ reflect.Type, seed int) reflect.Value {
	v := reflect.New(typ).Elem()
	switch {
	case typ == reflect.TypeFor[core.EnqueueObserver]():
		v.Set(reflect.ValueOf(&countingObserver{}))
	case typ.Kind() == reflect.String:
		v.SetString(fmt.Sprintf("value-%d", seed))
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Int64:
		v.SetInt(int64(seed + 1))
	case typ.Kind() == reflect.Pointer:
		v.Set(reflect.New(typ.Elem()))
	default:
		t.Fatalf("no non-zero value for a field of type %s: teach nonZeroOf one", typ)
	}
	return v
}

// countingObserver is an EnqueueObserver with an identity of its own.
type countingObserver struct{ seen int }

func (o *countingObserver) BeforeEnqueue(context.Context, *registry.Schedule, registry.Occurrence) (map[string]string, func(bool, error)) {
	o.seen++
	return nil, nil
}
