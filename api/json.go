package api

import (
	"encoding/json"
	"net/http"
)

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers {"message": msg}, the shape of every API error.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}

var (
	errNotFound   = "Resource not found"
	errBadRequest = "Body invalid"
)
