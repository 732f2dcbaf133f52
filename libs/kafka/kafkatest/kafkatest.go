// Package kafkatest gives a test a Kafka cluster: the one KAFKA_BROKERS
// names, or an embedded broker of its own.
package kafkatest

import (
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/kafka/embedded"
)

// Cluster is a test's Kafka: where it is and names of its own.
type Cluster struct {
	Config kafka.Config
	// Suffix is empty on a test's own broker and unique per call on a
	// shared cluster: tests append it to their topic and group names so
	// that they never read each other's messages.
	Suffix string
	// Broker is the test's own broker, or nil on a shared cluster.
	Broker *embedded.Broker
}

// New returns the cluster KAFKA_BROKERS names when it is set, and
// otherwise starts an embedded broker that stops with the test.
func New(t testing.TB) Cluster {
	t.Helper()
	if brokers := os.Getenv("KAFKA_BROKERS"); brokers != "" {
		return Cluster{
			Config: kafka.Config{Brokers: strings.Split(brokers, ","), Partitions: 3, ReplicationFactor: 1},
			Suffix: "." + strings.ToLower(rand.Text()[:10]),
		}
	}
	b := Embedded(t, embedded.Options{})
	return Cluster{Config: kafka.Config{Brokers: b.Addrs(), Partitions: 3, ReplicationFactor: 1}, Broker: b}
}

// Embedded starts an embedded broker that stops with the test, for
// tests that stop and restart it (an outage), which a shared cluster
// cannot offer.
func Embedded(t testing.TB, o embedded.Options) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// Topic is name on this cluster.
func (c Cluster) Topic(name string) string { return name + c.Suffix }

// String names the cluster in test output.
func (c Cluster) String() string {
	return fmt.Sprintf("kafka %s", strings.Join(c.Config.Brokers, ","))
}
