// FreeLoopbackPort: a port on 127.0.0.1 that nothing is bound to at the moment
// of asking, for servers a test starts that cannot pick their own port 0 and
// report it (dnsmasq, Prometheus). Another process may take it meanwhile;
// the servers' start-up checks catch that.
#ifndef OMNISTAGE_COMMON_TESTING_FREE_PORT_H_
#define OMNISTAGE_COMMON_TESTING_FREE_PORT_H_

#include <sys/socket.h>

namespace omnistage {

// `type` is SOCK_STREAM (TCP) or SOCK_DGRAM (UDP). 0 if none could be bound.
int FreeLoopbackPort(int type = SOCK_STREAM);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TESTING_FREE_PORT_H_
