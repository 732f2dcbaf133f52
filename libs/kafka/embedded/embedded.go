// Package embedded runs a Kafka-protocol broker in the process
// (franz-go's kfake) for `make run` and the tests when no cluster is
// configured: real Kafka clients talk to it over TCP on loopback.
package embedded

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options shape the broker.
type Options struct {
	// Port is its TCP port on 127.0.0.1; 0 picks a free one. A broker
	// restarted on its old port and DataDir is, to its clients, the
	// same broker back from an outage.
	Port int
	// DataDir keeps topics, messages and committed offsets across
	// restarts; empty keeps them in memory.
	DataDir string
}

// Broker is a running embedded broker.
type Broker struct{ cluster *kfake.Cluster }

// Start starts a one-node cluster. Topics are not created on first use:
// services create theirs at start, as they must with a real cluster.
func Start(o Options) (*Broker, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(o.Port), kfake.ClusterID("esim-embedded")}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start the embedded Kafka broker: %w", err)
	}
	return &Broker{cluster: c}, nil
}

// Addrs are the bootstrap addresses, host:port.
func (b *Broker) Addrs() []string { return b.cluster.ListenAddrs() }

// Close stops the broker and, with a DataDir, flushes it to disk.
func (b *Broker) Close() { b.cluster.Close() }
