/* test_parse.c - bounded number parsing. */
#include <stdint.h>
#include <string.h>

#include "tests/tap.h"
#include "util/error.h"
#include "util/parse.h"

int main(void)
{
	long l;
	uint64_t u;
	double d;

	is_int(nf_parse_long(&l, "42", 0, 100, "--n"), 0, "plain integer");
	is_int(l, 42, "value");
	is_int(nf_parse_long(&l, "101", 0, 100, "--n"), NF_EINPUT, "above max refused");
	is_str(nf_error_last(), "--n: '101' is not a whole number from 0 to 100", "message names the option and range");
	is_int(nf_parse_long(&l, "4x", 0, 100, "--n"), NF_EINPUT, "trailing garbage refused");
	is_int(nf_parse_long(&l, "", 0, 100, "--n"), NF_EINPUT, "empty refused");
	is_int(nf_parse_long(&l, "99999999999999999999999", 0, 100, "--n"), NF_EINPUT, "overflow refused");
	is_int(nf_parse_u64(&u, "-1", 10, "x"), NF_EINPUT, "negative u64 refused");
	is_int(nf_parse_u64(&u, "18446744073709551615", UINT64_MAX, "x"), 0, "u64 max");
	ok(u == UINT64_MAX, "u64 value");
	is_int(nf_parse_double(&d, "0.5", 0, 1, "t"), 0, "double");
	ok(d == 0.5, "double value");
	is_int(nf_parse_double(&d, "nan", 0, 1, "t"), NF_EINPUT, "nan refused");
	is_int(nf_parse_double(&d, "1e999", 0, 1e300, "t"), NF_EINPUT, "inf refused");
	is_int(nf_parse_double(&d, "2", 0, 1, "t"), NF_EINPUT, "range enforced");
	return done_testing();
}
