package observed

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metadatad/metadatad/store"
)

// Metrics are the series instrumented tables record into; one Metrics
// serves any number of backends, told apart by their backend label.
type Metrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

// NewMetrics creates the store series and registers them with reg:
//
//	metadatad_store_operation_duration_seconds{backend,operation}
//	metadatad_store_operation_errors_total{backend,operation,error}
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "metadatad_store_operation_duration_seconds",
			Help: "Latency of store operations, by backend and operation, failures included.",
			// From a Pebble point read (tens of µs) to a slow Azure batch.
			Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10),
		}, []string{"backend", "operation"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metadatad_store_operation_errors_total",
			Help: "Store operations that failed, by backend, operation and kind of error. " +
				"not_found, already_exists, conflict and invalid are answers of the contract; failure is the one to alert on. " +
				"A get that finds no row is an answer, not counted: every create reads whether its image exists.",
		}, []string{"backend", "operation", "error"}),
	}
	reg.MustRegister(m.duration, m.errors)
	return m
}

// errorKind sorts an error into the error label's few values.
func errorKind(err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "not_found"
	case errors.Is(err, store.ErrAlreadyExists):
		return "already_exists"
	case errors.Is(err, store.ErrConflict):
		return "conflict"
	case errors.Is(err, store.ErrInvalidKey), errors.Is(err, store.ErrInvalidEntity), errors.Is(err, store.ErrTooLarge),
		errors.Is(err, store.ErrInvalidBatch), errors.Is(err, store.ErrInvalidQuery):
		return "invalid"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "failure"
}

// observe records one operation that started at start and ended with err.
func (m *Metrics) observe(backend, operation string, start time.Time, err error) {
	m.duration.WithLabelValues(backend, operation).Observe(time.Since(start).Seconds())
	// A get's "no such row" is what it was asked (does it exist?), and
	// every create asks it: counted, it would drown the errors worth a look.
	if err != nil && !(operation == "get" && errors.Is(err, store.ErrNotFound)) {
		m.errors.WithLabelValues(backend, operation, errorKind(err)).Inc()
	}
}
