#include "unit.h"
int main(void){return unit_done();}
