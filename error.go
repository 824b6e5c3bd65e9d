package vdibroker

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Error codes of SPEC §9. Each maps to one HTTP status in HTTPStatus.
const (
	EInvalid         = "InvalidArgument"
	EUnauthenticated = "Unauthenticated"
	EPermission      = "PermissionDenied"
	ENotAssigned     = "NotAssigned"
	ENotFound        = "NotFound"
	EConflict        = "Conflict"
	ENoCapacity      = "NoCapacity"
	EHostStarting    = "HostStarting"
	// EStoreUnavailable: the broker's database cannot be reached (an
	// outage); the request may be retried after RetryAfter.
	EStoreUnavailable = "StoreUnavailable"
	// EPodUnavailable: another pod of the federation, which the request
	// needs, did not answer (R-G5); the request may be retried.
	EPodUnavailable = "PodUnavailable"
	// ETooManyRequests: a rate limit; retry after RetryAfter.
	ETooManyRequests = "TooManyRequests"
	EInternal        = "Internal"
)

// ENotEntitled is the refusal of an end user's connect to what is not
// assigned to them (R-E3): HTTP 403.
const ENotEntitled = "NotEntitled"

// ERemoteAppUnsupported is the refusal of an application connect to a
// pool none of whose session hosts can run RemoteApps (R-E12): HTTP 409,
// since retrying does not help until such a host is added to the pool.
const ERemoteAppUnsupported = "RemoteAppUnsupported"

// EPreconditionFailed is the refusal of a PUT whose If-Match or
// If-None-Match does not hold (R-E13): HTTP 412. The object changed since
// it was read (or exists, or does not): read it again.
const EPreconditionFailed = "PreconditionFailed"

// ReasonStartByAdministrator is the reason of a NoCapacity answering a
// Personal user's connect when her own host is not running and no connect
// of hers will start it: its start timed out and its agent is silent
// (R-A4). Only an administrator's start brings it back, so the answer has
// no Retry-After and tells her to ask her helpdesk, not to try again.
// While its agent has said within the heartbeat timeout that its machine
// goes down, it is not given: a reboot says the same and is back by
// itself, so she is told to try again (ReasonDesktopGoingDown: a
// Retry-After of at most 30 s, each retry told the same) until the
// machine is down.
const ReasonStartByAdministrator = "StartByAdministrator"

// ReasonDesktopGoingDown is the reason of a NoCapacity answering a
// Personal user's connect, in a pool that starts hosts on connect, while
// her own host's agent has said within the pool's heartbeat timeout that
// its machine goes down: a restart or a shutdown from within the machine
// (R-A4). It is not the pool's capacity, and no other host is right for
// her (it is her desktop): the answer has a Retry-After of at most 30 s
// until the machine is taken for down, and her retry then lands on it
// (a restart) or starts it, or, when its start timed out meanwhile, is
// answered ReasonStartByAdministrator. A reader tells her that her
// desktop restarts or shuts down and to try again, and to ask her
// helpdesk only if it does not come back.
const ReasonDesktopGoingDown = "DesktopGoingDown"

// Error is the one error type of the domain. Code is one of the E* constants,
// Message is safe to show to the caller, Field names the offending input field
// (JSON path in camelCase) when there is one.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Reason, when set, is one of the Reason* constants: what the code
	// alone does not say and a reader answers differently (vdibroker's
	// addition to the error body; the portal's words, R-A4).
	Reason string `json:"reason,omitempty"`
	// RetryAfter, when set, is how long the caller should wait before
	// trying again (the Retry-After header of a 429 or a 503).
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldError returns an InvalidArgument error naming field.
func FieldError(field, format string, args ...any) *Error {
	return &Error{Code: EInvalid, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or EInternal
// for any other non-nil error, or "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the message a caller may see: the *Error's message, or
// "internal error" for anything else (details belong in the log only).
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != EInternal {
		return e.Message
	}
	return "internal error"
}

// ErrorRetryAfter returns the RetryAfter of the first *Error in err's chain.
func ErrorRetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// ErrorReason returns the reason of the first *Error in err's chain.
func ErrorReason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// ErrorField returns the field of the first *Error in err's chain.
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// codeStatus is the one table mapping codes to HTTP statuses, used by the
// server to answer and by the client to map back.
var codeStatus = map[string]int{
	EInvalid:              http.StatusBadRequest,
	EUnauthenticated:      http.StatusUnauthorized,
	EPermission:           http.StatusForbidden,
	ENotAssigned:          http.StatusForbidden,
	ENotEntitled:          http.StatusForbidden,
	ENotFound:             http.StatusNotFound,
	EConflict:             http.StatusConflict,
	ERemoteAppUnsupported: http.StatusConflict,
	EPreconditionFailed:   http.StatusPreconditionFailed,
	ENoCapacity:           http.StatusServiceUnavailable,
	EHostStarting:         http.StatusServiceUnavailable,
	EStoreUnavailable:     http.StatusServiceUnavailable,
	EPodUnavailable:       http.StatusServiceUnavailable,
	ETooManyRequests:      http.StatusTooManyRequests,
	EInternal:             http.StatusInternalServerError,
}

// HTTPStatus returns the HTTP status for an error code (500 for unknown codes).
func HTTPStatus(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}
