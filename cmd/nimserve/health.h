/* health.h - the image's health-check probe (see health.c). */
#ifndef NF_CMD_NIMSERVE_HEALTH_H
#define NF_CMD_NIMSERVE_HEALTH_H

/* 0 when nimserve on 127.0.0.1:port answers ready, else 1 (an exit status). */
int nf_health_probe(long port);

#endif
