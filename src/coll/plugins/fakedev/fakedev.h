// The fake device's parts: fakedev.cpp (its memory, the IPC rules it
// enforces, its faults) and stream.cpp (the stream its launched calls run
// on).
#pragma once

#include <cstddef>

#include "coll/device_algo.h"

namespace trainit::coll::fakedev {

// fakedev.cpp. The hang fault strikes the first use of the device (and
// never returns); the wrong fault flips a result's lowest bit.
void maybe_hang(const char* what);
void corrupt_if_asked(void* dst);
// The late and mute faults (fakedev_fault.h), for the stream.
bool retires_late();
bool writes_no_done_words();
// A launched call's memory: live device buffers of this process (-EFAULT,
// a broken rule, else).
int check_launch(const dev::Call& a);

// stream.cpp: the backend's launch, query and host_mapped entries
// (backend.h), and drain(), which waits until every launched call is done.
int launch(const void* call, void* stream);
int query(void* stream);
int host_mapped(size_t bytes, void** host, void** device_view);
int free_host_mapped(void* host);
void drain();

}  // namespace trainit::coll::fakedev
