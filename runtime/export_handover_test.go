package runtime

// CoolingDown reports whether this replica stays out of the election after
// handing the lease over.
func (r *Runtime) CoolingDown() bool {
	_, ok := r.redis.CoolingDown()
	return ok
}
