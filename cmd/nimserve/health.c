/*
 * health.c - `nimserve --health`: the image's health-check command.  The
 * image has no curl, so nimserve asks itself: GET /v1/health/ready on
 * 127.0.0.1:PORT, exit 0 on 200, else 1.
 */
#define _GNU_SOURCE
#include "cmd/nimserve/health.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "util/banned.h"

int nf_health_probe(long port)
{
	static const char request[] = "GET /v1/health/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct timeval timeout = {.tv_sec = 5};
	char reply[64] = "";
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), healthy = 0;

	if (fd < 0)
		return 1;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
	    write(fd, request, sizeof(request) - 1) == (ssize_t)(sizeof(request) - 1)) {
		while (got < sizeof(reply) - 1) {
			ssize_t n = read(fd, reply + got, sizeof(reply) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		reply[got] = '\0';
		/* "HTTP/1.x 200 ..." */
		healthy = got > 12 && !strncmp(reply, "HTTP/1.", 7) && !strncmp(reply + 8, " 200", 4);
	}
	close(fd);
	printf("%s\n", healthy ? "ready" : "not ready");
	return healthy ? 0 : 1;
}
