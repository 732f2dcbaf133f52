package kafka_test

import (
	"context"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/trace"
)

func traceID(ctx context.Context) string {
	return trace.SpanContextFromContext(ctx).TraceID().String()
}

func splitPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	return host, port, err
}
