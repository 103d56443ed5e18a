package admin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"sync"
)

// writeIndentedArray writes items as one JSON array, byte for byte what
// json.Encoder with SetIndent("", "  ") writes for the slice, but without
// building it in one buffer: the encoder marshals the whole value compact
// and then re-indents it, which for the unpaged list of 100,000 schedules
// is one buffer the size of the whole answer, grown by copying, and most
// of the request's time (BenchmarkWriteIndentedArray; BENCHMARKS.md,
// "Micro-benchmarks").
// Here the items are marshalled in parts, on up to GOMAXPROCS goroutines,
// and written in order as each part is ready; a schedule's row (apiSchedule)
// appends its own JSON, without encoding/json.
func writeIndentedArray(w io.Writer, items []any) error {
	if len(items) == 0 {
		_, err := io.WriteString(w, "[]\n")
		return err
	}
	const part = 512
	parts := (len(items) + part - 1) / part
	type encoded struct {
		buf bytes.Buffer
		err error
	}
	out := make([]encoded, parts)
	ready := make([]chan struct{}, parts)
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	workers := min(parts, runtime.GOMAXPROCS(0))
	// At most ahead parts are marshalled and not yet written: a slow
	// client holds back the marshalling, not the memory.
	ahead := make(chan struct{}, 2*workers)
	// A written part's buffer goes to the next part: a new buffer for
	// each of the 200 parts of 100,000 schedules was more fresh memory a
	// request than the whole answer as they grew, cleared page by page,
	// and garbage to collect.
	free := make(chan bytes.Buffer, 2*workers+1)
	next, stop := make(chan int), make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()   // second: the workers end once the feeder closes next
	defer close(stop) // first: the feeder stops feeding
	go func() {
		defer close(next)
		for i := range parts {
			select {
			case ahead <- struct{}{}:
			case <-stop:
				return
			}
			next <- i
		}
	}()
	for range workers {
		wg.Go(func() {
			for i := range next {
				e := &out[i]
				select {
				case e.buf = <-free:
				default:
				}
				first, end := i*part, min((i+1)*part, len(items))
				for j := first; j < end && e.err == nil; j++ {
					if j > 0 {
						e.buf.WriteString(",\n  ")
					}
					if j == first+1 {
						// Room for the part's rest at the first item's
						// size, rather than doubling the buffer up to it
						// (a recycled buffer has it already).
						e.buf.Grow(e.buf.Len() * (end - j) * 9 / 8)
					}
					// Not an interface: apiFamily embeds apiSchedule and
					// would inherit its method, and its fields.
					if s, ok := items[j].(apiSchedule); ok {
						e.buf.Write(s.appendIndented(e.buf.AvailableBuffer()))
						continue
					}
					var b []byte
					if b, e.err = json.MarshalIndent(items[j], "  ", "  "); e.err == nil {
						e.buf.Write(b)
					}
				}
				close(ready[i])
			}
		})
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var err error
	write := func(b []byte) {
		if err == nil {
			_, err = bw.Write(b)
		}
	}
	write([]byte("[\n  "))
	for i := range parts {
		<-ready[i]
		if out[i].err != nil && err == nil {
			err = out[i].err
		}
		write(out[i].buf.Bytes())
		out[i].buf.Reset() // written: the next part's
		select {
		case free <- out[i].buf:
		default:
		}
		out[i].buf = bytes.Buffer{}
		<-ahead
		if err != nil {
			return err // the client is gone, or an item does not marshal: stop marshalling
		}
	}
	write([]byte("\n]\n"))
	if err != nil {
		return err
	}
	return bw.Flush()
}
