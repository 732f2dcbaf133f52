package accounts

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// memStore keeps no self-serve access state: those rules are tested
// against Postgres (package postgres and twirpserver).

func (m *memStore) ListUsers(context.Context, uuid.UUID) ([]User, error) { return nil, errNotInMemory }
func (m *memStore) RemoveUser(context.Context, uuid.UUID, uuid.UUID) error {
	return errNotInMemory
}
func (m *memStore) InsertReset(context.Context, ResetRecord) error { return errNotInMemory }
func (m *memStore) Reset(context.Context, []byte) (StoredReset, error) {
	return StoredReset{}, errNotInMemory
}
func (m *memStore) SpendReset(context.Context, []byte, string, time.Time, SessionRecord) (User, error) {
	return User{}, errNotInMemory
}
func (m *memStore) InsertLiveRequest(context.Context, uuid.UUID, string, time.Time) error {
	return errNotInMemory
}
func (m *memStore) LiveRequest(context.Context, uuid.UUID) (LiveRequest, error) {
	return LiveRequest{}, errNotInMemory
}
func (m *memStore) ListLiveRequests(context.Context) ([]LiveRequest, error) {
	return nil, errNotInMemory
}
